package spec

import "strconv"

// ParseError is the error Parse and Validate return: one line naming the
// token, where it is and why it is wrong. Callers find it with errors.As.
type ParseError struct {
	// Pos is the 1-based index of the offending token among all tokens of
	// the spec, counting "|" separators as tokens; 0 when there is no
	// source text (Validate on a Spec built in code).
	Pos   int
	Token string // the offending token as typed (or the stage kind)
	Msg   string // why, already naming the token: `unknown keyword "dela"`
	Err   error  // the underlying cause (a units parse error), if any
}

// Error returns `MSG at position POS`, or MSG when there is no position.
func (e *ParseError) Error() string {
	if e.Pos > 0 {
		return e.Msg + " at position " + strconv.Itoa(e.Pos)
	}
	return e.Msg
}

// Unwrap returns the underlying cause.
func (e *ParseError) Unwrap() error { return e.Err }
