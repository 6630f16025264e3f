package spec

import "fmt"

// keyword is one entry of a kind's keyword table: how it reads what
// follows it, and the rules of giving it again. Every kind's options are
// such a table, read by one loop (keywords.read), as iproute2's parsers
// loop over their keywords in any order.
type keyword struct {
	// read reads the arguments after kw. given false: what it read
	// counts as not given (a zero, as tc's parsers count a zero), so it
	// may be given again and Given does not hold it.
	read func(kw token, c *cursor) (given bool, err error)
	// name is the keyword an alias stands for ("": the entry's own).
	name string
	// once: giving it again after it was given is an error; otherwise
	// the later value overwrites the earlier.
	once bool
	// exclusive names a pair of keywords of which only one may be given;
	// the entry is one of them.
	exclusive [2]string
}

// keywords is a kind's table: its keywords by what is typed, aliases
// included.
type keywords map[string]keyword

// read runs c's keywords through the table of kind: unknown words get
// unknown's message. It returns the keyword token of each value given,
// by name (the last one for a keyword given again).
func (ks keywords) read(kind string, c *cursor, unknown func(kw token) string) (map[string]token, error) {
	given := map[string]token{}
	for c.more() {
		kw := c.next()
		k, ok := ks[kw.text]
		if !ok {
			return nil, &ParseError{Pos: kw.pos, Token: kw.text, Msg: unknown(kw)}
		}
		name := k.name
		if name == "" {
			name = kw.text
		}
		if prev, dup := given[name]; dup && k.once {
			return nil, &ParseError{Pos: kw.pos, Token: kw.text, Msg: fmt.Sprintf("%s: %s given twice (first at position %d)", kind, kw.text, prev.pos)}
		}
		if x := k.exclusive; x[0] != "" {
			other := x[0]
			if other == name {
				other = x[1]
			}
			if _, dup := given[other]; dup {
				return nil, &ParseError{Pos: kw.pos, Token: kw.text, Msg: x[0] + " and " + x[1] + " are mutually exclusive"}
			}
		}
		ok, err := k.read(kw, c)
		if err != nil {
			return nil, err
		}
		if ok {
			given[name] = kw
		}
	}
	return given, nil
}

// names is the set of what can be typed in the table, for the hints an
// unknown word of another kind gets.
func (ks keywords) names() map[string]bool {
	out := make(map[string]bool, len(ks))
	for w := range ks {
		out[w] = true
	}
	return out
}

// arg is a keyword with one argument (what names it when it is missing),
// which set stores.
func arg(what string, set func(kw, t token) (given bool, err error)) func(token, *cursor) (bool, error) {
	return func(kw token, c *cursor) (bool, error) {
		t, err := c.need(kw, what)
		if err != nil {
			return false, err
		}
		return set(kw, t)
	}
}

// overwrite is a keyword that counts as given whenever read succeeds:
// netem's and the queue disciplines' (giving one again overwrites).
func overwrite(read func(kw token, c *cursor) error) keyword {
	return keyword{read: func(kw token, c *cursor) (bool, error) { return true, read(kw, c) }}
}
