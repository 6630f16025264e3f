package experiment
import ("context";"os";"testing")
func TestZZRouting(t *testing.T) {
	cfg := Config{Size: 64<<20, Out: t.TempDir(), Log: os.Stderr, ClientSysctls: map[string]string{"net.ipv4.tcp_rmem": "4096 131072 3145728"}}
	r, err := Run(context.Background(), cfg)
	if err != nil { t.Fatal(err) }
	WriteSummary(os.Stdout, r)
	b, _ := os.ReadFile(r.Report); os.WriteFile("/tmp/report.html", b, 0644)
}
