package pgqueue

// What Postgres' jsonb refuses in a JSON document that encoding/json considers valid: checked
// before an enqueue sends anything, so that a bad payload fails with a clear error and leaves the
// caller's transaction usable.

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits of Postgres' numeric type, which stores jsonb numbers: decimal digits before and after
// the point, and the exponent its parser accepts.
const (
	numericDigitsMax = 131072
	numericScaleMax  = 16383
	numericExpMax    = math.MaxInt32 / 2
)

// checkJSONB reports what Postgres' jsonb refuses in a valid JSON document, which encoding/json
// lets through in a json.RawMessage or from a json.Marshaler: bytes that are not UTF-8, strings
// with \u0000 (jsonb strings are text, which cannot hold U+0000) or with UTF-16 surrogates that
// do not form a pair, and numbers beyond the range of numeric. encoding/json emits none of
// these for Go strings and numbers.
func checkJSONB(doc []byte) error {
	if !utf8.Valid(doc) {
		return invalidf("payload JSON is not valid UTF-8, which jsonb refuses")
	}
	for i := 0; i < len(doc); {
		c := doc[i]
		switch {
		case c == '"':
			n, err := checkJSONBString(doc[i:])
			if err != nil {
				return err
			}
			i += n
		case c == '-' || c >= '0' && c <= '9':
			j, exp := i, false
			for ; j < len(doc); j++ {
				if d := doc[j]; d == 'e' || d == 'E' {
					exp = true
				} else if d != '+' && d != '-' && d != '.' && (d < '0' || d > '9') {
					break
				}
			}
			// Without an exponent, a number this short has too few digits to overflow.
			if exp || j-i > numericScaleMax {
				if err := checkNumeric(string(doc[i:j])); err != nil {
					return err
				}
			}
			i = j
		default:
			i++
		}
	}
	return nil
}

// checkJSONBString checks the string that starts doc and returns its length, quotes included.
func checkJSONBString(doc []byte) (int, error) {
	pendingHigh := false // the previous escape was a high surrogate, which needs a low one next
	for i := 1; i < len(doc); i++ {
		c := doc[i]
		if c != '"' && c != '\\' && !pendingHigh {
			continue
		}
		if c != '\\' {
			if pendingHigh {
				return 0, errUnpairedSurrogate()
			}
			if c == '"' {
				return i + 1, nil
			}
			continue
		}
		i++
		if i >= len(doc) || doc[i] != 'u' {
			if pendingHigh {
				return 0, errUnpairedSurrogate()
			}
			continue
		}
		if i+4 >= len(doc) {
			return 0, invalidf("payload JSON ends inside an escape")
		}
		v, err := strconv.ParseUint(string(doc[i+1:i+5]), 16, 16)
		if err != nil {
			return 0, invalidf("payload JSON has an invalid \\u escape")
		}
		i += 4
		r := rune(v)
		switch {
		case r == 0:
			return 0, invalidf("payload contains U+0000 (JSON \\u0000), which Postgres jsonb cannot store")
		case pendingHigh && (r < 0xDC00 || r > 0xDFFF):
			return 0, errUnpairedSurrogate()
		case pendingHigh:
			pendingHigh = false
		case r >= 0xD800 && r <= 0xDBFF:
			pendingHigh = true
		case utf16.IsSurrogate(r):
			return 0, errUnpairedSurrogate()
		}
	}
	return 0, invalidf("payload JSON ends inside a string")
}

func errUnpairedSurrogate() error {
	return invalidf("payload JSON has an unpaired UTF-16 surrogate escape, which jsonb refuses")
}

func errNumericOverflow() error {
	return invalidf("payload JSON has a number beyond the range of Postgres numeric (jsonb)")
}

// checkNumeric reports a JSON number that Postgres' numeric cannot hold: more than
// numericDigitsMax digits before the point or numericScaleMax after it, once the exponent is
// applied, or an exponent its parser refuses.
func checkNumeric(num string) error {
	mantissa, expText, hasExp := strings.Cut(strings.ToLower(strings.TrimPrefix(num, "-")), "e")
	exp := int64(0)
	if hasExp {
		var err error
		if exp, err = strconv.ParseInt(expText, 10, 64); err != nil || exp >= numericExpMax || exp <= -numericExpMax {
			return errNumericOverflow()
		}
	}
	intPart, frac, _ := strings.Cut(mantissa, ".")
	if int64(len(frac))-exp > numericScaleMax {
		return errNumericOverflow()
	}
	all := intPart + frac
	significant := strings.TrimLeft(all, "0")
	if significant == "" {
		return nil // zero, whatever its exponent
	}
	leadingZeros := int64(len(all) - len(significant))
	if int64(len(intPart))-leadingZeros+exp > numericDigitsMax {
		return errNumericOverflow()
	}
	return nil
}
