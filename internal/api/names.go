package api

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Names are printed in tables, used in URL paths and directory names, and
// compared for tenancy, so they follow one rule, a DNS label's as
// Kubernetes applies it to label values: 1-63 characters, letters, digits,
// '-', '_' and '.', beginning and ending with a letter or digit. Names
// that are ids in paths or scopes (deployments, orgs, teams, users) are
// lowercase as well. Free text (a model name, a token's note) may hold
// any printable character but no control or bidirectional-override
// character, so nothing a tenant writes can rewrite a terminal.
const MaxNameLen = 63

// CheckName checks a name; lower also refuses uppercase letters.
func CheckName(field, s string, lower bool) *Error {
	if s == "" {
		return Invalid(field, "required")
	}
	what := "letters, digits, '-', '_' and '.'"
	if lower {
		what = "lowercase letters, digits, '-', '_' and '.'"
	}
	if len(s) > MaxNameLen {
		return Invalid(field, "%d characters: at most %d (%s)", len(s), MaxNameLen, what)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || !lower && c >= 'A' && c <= 'Z'
		if !alnum && (i == 0 || i == len(s)-1 || c != '-' && c != '_' && c != '.') {
			return Invalid(field, "%s: expected %s, beginning and ending with a letter or digit (at most %d)", Quote(s), what, MaxNameLen)
		}
	}
	return nil
}

// CheckText checks free text of at most max bytes.
func CheckText(field, s string, max int) *Error {
	if len(s) > max {
		return Invalid(field, "%d bytes: at most %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return Invalid(field, "not valid UTF-8")
	}
	for _, r := range s {
		if Unprintable(r) {
			return Invalid(field, "%s: control and bidirectional-override characters are not allowed", Quote(s))
		}
	}
	return nil
}

// Unprintable reports a rune that must never reach a terminal raw:
// control characters and the bidirectional formatting characters that
// reorder what follows them.
func Unprintable(r rune) bool {
	switch {
	case unicode.IsControl(r), r == utf8.RuneError:
		return true
	case r == 0x061C, r == 0x200E, r == 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// Quote is s as it may be shown: unprintable characters escaped, and cut
// at 80 bytes so that an error message stays a line.
func Quote(s string) string {
	if len(s) > 80 {
		s = s[:80]
		for !utf8.ValidString(s) && len(s) > 0 {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return `"` + Escape(s) + `"`
}

// Escape replaces every unprintable character of s (Unprintable, and
// invalid UTF-8) by its Go escape, leaving the rest as it is.
func Escape(s string) string {
	clean := true
	for _, r := range s {
		if Unprintable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case Unprintable(r) && r < 0x80:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case Unprintable(r):
			b.WriteString(`\u`)
			b.WriteString(hex2(byte(r >> 8)))
			b.WriteString(hex2(byte(r)))
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&15]})
}

// CheckScope checks a quota or token scope: org, org/team or
// org/team/user, each part a lowercase name.
func CheckScope(field, scope string) *Error {
	parts := strings.Split(scope, "/")
	if len(parts) > 3 {
		return Invalid(field, "%s: expected org, org/team or org/team/user", Quote(scope))
	}
	for _, p := range parts {
		if err := CheckName(field, p, true); err != nil {
			if p == "" {
				return Invalid(field, "%s: expected org, org/team or org/team/user, no empty part", Quote(scope))
			}
			return err
		}
	}
	return nil
}

// DeriveName makes a deployment name from a served model's name, for a
// request that names only the model (§3's example has no name):
// lowercased, every other character a '-', cut to MaxNameLen.
func DeriveName(model string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(model) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	s := b.String()
	if len(s) > MaxNameLen {
		s = s[:MaxNameLen]
	}
	return strings.Trim(s, "-._")
}
