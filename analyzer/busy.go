package analyzer

// WaitedMs is the time the direction's sender had nothing to send: its
// idle gaps and the turns it waited for its peer's next request (the
// diagnosis calls the transfer application-limited when this is a large
// share of it).
func (d *Direction) WaitedMs() float64 {
	return d.IdleTotalMs + d.TurnTotalMs
}

// BusyRateBps is the direction's data rate (bit/s) while its sender had
// data to send: its unique bytes over the transfer time less WaitedMs, the
// rate the diagnosis compares with the path's bounds. Where the sender
// never waited, it is the data rate.
func (d *Direction) BusyRateBps() float64 {
	busy := d.TransferMs - d.WaitedMs()
	if busy <= 0 || d.TransferMs <= 0 {
		return d.DataRateBps
	}
	return 8 * float64(d.UniqueBytes) / (busy / 1e3)
}
