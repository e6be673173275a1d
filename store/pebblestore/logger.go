package pebblestore

import (
	"context"
	"fmt"
	"log/slog"
)

// pebbleLogger adapts slog to pebble.Logger.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.LogAttrs(context.Background(), slog.LevelInfo, fmt.Sprintf(format, args...), slog.String("component", "pebble"))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.LogAttrs(context.Background(), slog.LevelError, fmt.Sprintf(format, args...), slog.String("component", "pebble"))
}

// Fatalf logs and panics. Pebble calls it when it cannot safely continue
// and expects it not to return; see Open for how the panic is handled.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.LogAttrs(context.Background(), slog.LevelError, msg, slog.String("component", "pebble"), slog.Bool("fatal", true))
	panic(msg)
}
