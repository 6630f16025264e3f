package spec

import "strings"

// stageParser is what Parse knows about one tc kind: how to read its
// arguments (the words after the kind) into a Stage. Each kind registers
// itself from its own file (netem_parse.go, tbf_parse.go, queue.go; its
// options a keyword table, keywords.go),
// so a new kind is one registration, not a case in parseStage.
type stageParser struct {
	parse func(kind token, args []token) (Stage, error)
	// queue marks a classless queue discipline (pfifo, codel, ...): it
	// has no class a further stage could hang from, so it must be the
	// last stage, and after a shaping stage (tbf) it is that stage's
	// child qdisc.
	queue bool
}

// kinds holds netem and tbf from the start, so that errors list them
// first; the queue disciplines add themselves from their files' init.
var (
	kinds = map[string]stageParser{
		"netem": {parse: func(k token, a []token) (Stage, error) { return parseNetem(k, a) }},
		"tbf":   {parse: func(k token, a []token) (Stage, error) { return parseTBF(k, a) }},
	}
	kindOrder = []string{"netem", "tbf"}
)

func registerKind(kind string, p stageParser) {
	if _, dup := kinds[kind]; dup {
		panic("spec: kind " + kind + " registered twice")
	}
	kinds[kind] = p
	kindOrder = append(kindOrder, kind)
}

// kindList names the kinds for errors: "netem, tbf, pfifo or red".
func kindList() string {
	n := len(kindOrder)
	if n < 2 {
		return strings.Join(kindOrder, "")
	}
	return strings.Join(kindOrder[:n-1], ", ") + " or " + kindOrder[n-1]
}

// IsQueueKind reports whether kind is a classless queue discipline
// (pfifo, bfifo, codel, fq_codel, pie, red): a stage that only holds
// packets until the stage before it (a shaper such as tbf, or an htb
// class) takes them.
func IsQueueKind(kind string) bool { return kinds[kind].queue }
