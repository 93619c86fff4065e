package store

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcd logs through zap; berth logs through slog. zapToSlog is the small
// zapcore.Core that carries the embedded etcd's errors into
// the server's log, so that what etcd says before it gives up (a full
// disk, a failing fsync: it treats both as fatal) is said where the
// operator looks, with etcd's own fields. zap's exp/zapslog goes the
// other way (slog through zap), so this is written here.
type zapToSlog struct {
	log   *slog.Logger
	attrs []any
}

// etcdLogger is the zap logger the embedded etcd gets: errors and above (its warnings, slow applies on a busy disk, would drown the server log).
func etcdLogger(log *slog.Logger) *zap.Logger {
	return zap.New(&zapToSlog{log: log.With("component", "etcd")})
}

func (c *zapToSlog) Enabled(l zapcore.Level) bool { return l >= zapcore.ErrorLevel }

func (c *zapToSlog) With(fields []zapcore.Field) zapcore.Core {
	return &zapToSlog{log: c.log, attrs: append(append([]any(nil), c.attrs...), fieldAttrs(fields)...)}
}

func (c *zapToSlog) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *zapToSlog) Write(e zapcore.Entry, fields []zapcore.Field) error {
	level := slog.LevelError
	args := append(append([]any(nil), c.attrs...), fieldAttrs(fields)...)
	if e.Level >= zapcore.DPanicLevel {
		args = append(args, "etcd_level", e.Level.String()) // etcd exits after this line
	}
	c.log.Log(context.Background(), level, e.Message, args...)
	return nil
}

func (c *zapToSlog) Sync() error { return nil }

// fieldAttrs turns zap fields into slog key-value pairs.
func fieldAttrs(fields []zapcore.Field) []any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]any, 0, 2*len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, k, v)
	}
	return out
}
