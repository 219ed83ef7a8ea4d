package entflake

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// sentinels are the errors every bad input must wrap.
var sentinels = []error{ErrInvalidLayout, ErrInvalidWorkerID, ErrInvalidEpoch, ErrInvalidPolicy,
	ErrInvalidService, ErrUnknownDialect, ErrInvalidOption, ErrClockBeforeEpoch}

// FuzzOptions: no combination of option values panics, and every refusal
// wraps one of the exported errors; what is accepted issues a valid ID of
// the requested worker.
func FuzzOptions(f *testing.F) {
	f.Add(int64(7), 0, 10, 12, int64(0), uint8(0), int64(time.Second), "svc", int64(time.Second), "")
	f.Add(int64(-1), 5, 5, 12, int64(-5), uint8(3), int64(0), "__global__", int64(-1), "sqlite3")
	f.Add(int64(1<<40), 30, -3, 0, int64(1)<<50, uint8(9), int64(-time.Hour), "x\x00y", int64(1)<<62, "oracle")
	f.Fuzz(func(t *testing.T, worker int64, cs, w, s int, epochMs int64, policy uint8, limit int64,
		service string, leaseTimeout int64, dialectName string) {
		opts := []Option{
			WithLayout(Layout{ClockSeqBits: cs, WorkerBits: w, SequenceBits: s}),
			WithService(service),
			WithLogger(slog.New(slog.DiscardHandler)),
		}
		if epochMs != 0 {
			opts = append(opts, WithEpoch(time.UnixMilli(epochMs)))
		}
		switch policy % 5 {
		case 1:
			opts = append(opts, WithRollbackPolicy(ClampRollback(time.Duration(limit))))
		case 2:
			opts = append(opts, WithRollbackPolicy(WaitRollback(time.Duration(limit))))
		case 3:
			opts = append(opts, WithRollbackPolicy(RejectRollback()))
		case 4:
			opts = append(opts, WithRollbackPolicy(BumpClockSequence()))
		}
		check := func(g *Generator, err error) {
			if err != nil {
				for _, s := range sentinels {
					if errors.Is(err, s) {
						return
					}
				}
				t.Fatalf("error wraps no exported error: %v", err)
			}
			id, err := g.NextID()
			if err != nil {
				t.Fatalf("accepted generator cannot issue: %v", err)
			}
			p, err := g.Decode(id)
			if err != nil || p.WorkerID != g.WorkerID() {
				t.Fatalf("issued %d decodes to %+v (%v), worker %d", id, p, err, g.WorkerID())
			}
		}
		check(New(worker, opts...))
		t.Setenv(EnvWorkerID, "")
		lopts := append(opts, WithLeaseTimeout(time.Duration(leaseTimeout)))
		check(OpenDB(context.Background(), nil, dialectName, lopts...))
	})
}
