package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"
)

// jsonType names a Go type as the JSON it is read from, so that errors
// speak of the wire format, never of berth's internal type names.
func jsonType(t reflect.Type) string {
	if t == reflect.TypeOf(time.Duration(0)) {
		return "a duration string such as \"90m\""
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonType(t.Elem())
	}
	return "another type"
}

func sizeOf(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

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
	var tooBig *http.MaxBytesError
	switch {
	case strings.Contains(err.Error(), "exceeded max depth"):
		return Invalid("body", "nested too deeply: berth's objects are a few levels deep")
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
		return Invalid(field, "expected %s, got JSON %s", jsonType(typ.Type), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return Invalid(name, "unknown field")
	case errors.As(err, &tooBig):
		return &Error{Code: "too_large", Field: "body", Message: fmt.Sprintf("larger than the limit of %d bytes (%s)", tooBig.Limit, sizeOf(tooBig.Limit))}
	}
	return Invalid("", "body: %s", err.Error())
}
