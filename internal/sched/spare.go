package sched

import "sync"

// spare keeps one value for the next pass to reuse: a pass's queue
// buffers are hundreds of MB at a million pending. It is not a
// sync.Pool: a pool keeps a value per CPU, in a private slot that only
// goroutines on that CPU can take, so a pass that ran on the other CPU
// than the last made a set of its own, and both were kept. The server at
// rest with 1M pending held 370 MB of queue buffers where one set is
// 200 MB, and what is kept sets the collector's heap goal, so RSS. One
// slot keeps one set; passes that run at once (the simulator's policies)
// take turns with it or make their own.
type spare[T any] struct {
	mu sync.Mutex
	v  *T
}

// take returns the kept value, or a new zero one.
func (s *spare[T]) take() *T {
	s.mu.Lock()
	v := s.v
	s.v = nil
	s.mu.Unlock()
	if v == nil {
		v = new(T)
	}
	return v
}

// put keeps v for the next take, in place of anything kept before.
func (s *spare[T]) put(v *T) {
	s.mu.Lock()
	s.v = v
	s.mu.Unlock()
}
