package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Error is the body of every error response.
type Error struct {
	// Code is machine-readable: invalid, unauthorized, forbidden,
	// not_found, conflict, quota, not_leader, unavailable, internal.
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	// Scope names the token scope or quota that refused the request.
	Scope string `json:"scope,omitempty"`
	// Leader is where writes go when this server does not lead.
	Leader string `json:"leader,omitempty"`
}

// ErrorBody wraps Error as {"error": {...}}.
type ErrorBody struct {
	Error Error `json:"error"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// Invalid builds a 400 error for a field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: "invalid", Field: field, Message: fmt.Sprintf(format, args...)}
}

// FromFieldError turns a "field: message" validation error into an Error.
func FromFieldError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	msg := err.Error()
	if field, rest, ok := strings.Cut(msg, ": "); ok && !strings.Contains(field, " ") {
		return &Error{Code: "invalid", Field: field, Message: rest}
	}
	return &Error{Code: "invalid", Message: msg}
}

// Decode reads exactly one JSON value into v, refusing unknown fields,
// wrong types and trailing data, with errors that name the field.
func Decode(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return Invalid("", "body: expected one JSON object, found more after it")
	}
	if _, err := dec.Token(); err != io.EOF {
		return Invalid("", "body: expected one JSON object, found trailing data")
	}
	return nil
}

func decodeError(err error) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tooBig interface{ Error() string }
	switch {
	case errors.Is(err, io.EOF):
		return Invalid("", "body: expected a JSON object, got an empty body")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Invalid("", "body: malformed JSON: it ends before the object does")
	case errors.As(err, &syn):
		return Invalid("", "body: malformed JSON at byte %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return Invalid(field, "expected %s, got JSON %s", typ.Type.String(), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return Invalid(name, "unknown field")
	case strings.Contains(err.Error(), "request body too large"):
		tooBig = err
		return Invalid("", "body: %s", tooBig.Error())
	}
	return Invalid("", "body: %s", err.Error())
}
