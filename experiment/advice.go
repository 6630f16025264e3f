package experiment

// advice gathers the analyzer's advice from both captures, server first
// (it sees the sender), without repeating a line.
func advice(r *Result) []string {
	seen := map[string]bool{}
	var out []string
	for _, side := range []string{SideServer, SideClient} {
		cr := r.Captures[side]
		if cr == nil || cr.Diagnosis == nil {
			continue
		}
		for _, a := range cr.Diagnosis.Advice {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}
