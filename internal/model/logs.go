package model

import "time"

// Log streams an allocation writes: its stdout and its stderr, kept by
// the agent as files in the allocation's directory.
const (
	LogStdout = "stdout"
	LogStderr = "stderr"
)

// MaxLogChunk caps the bytes one LogChunk carries.
const MaxLogChunk = 256 << 10

// LogRequest asks a node's agent for part of one allocation's log. The
// server queues it for the node; the agent picks it up with its next
// log poll (the agent only ever dials out, so no node needs a port open
// to the servers).
type LogRequest struct {
	ID     string `json:"id"`
	Alloc  string `json:"alloc"`
	Stream string `json:"stream"`
	// Offset is the byte of the log file to start at; negative: the
	// tail, as Tail and Since say.
	Offset int64 `json:"offset"`
	// Tail is how many of the last lines a tail read starts with; 0
	// means the whole kept log.
	Tail int `json:"tail,omitempty"`
	// Since starts a tail read at the first output written at or after
	// this time (to the second the agent samples log sizes at).
	Since time.Time `json:"since,omitzero"`
	// Max caps the bytes of the answer (at most MaxLogChunk).
	Max int `json:"max,omitempty"`
}

// LogChunk is an agent's answer to one LogRequest.
type LogChunk struct {
	ID   string `json:"id"`
	Data []byte `json:"data,omitempty"`
	// Offset is where Data starts in the log file; Size is the file's
	// size when read, so Offset+len(Data) < Size says more is there.
	Offset int64 `json:"offset"`
	Size   int64 `json:"size"`
	// Rotated says the file was cut below the offset asked for (its cap,
	// LogMaxBytes): Data starts at the start of what is kept.
	Rotated bool `json:"rotated,omitempty"`
	// Done says the allocation's process has ended: nothing more will
	// be written.
	Done  bool   `json:"done,omitempty"`
	Error string `json:"error,omitempty"`
}

// LogPoll is what an agent sends to wait for log requests.
type LogPoll struct {
	NodeID string `json:"node_id"`
}

// LogRequests is the answer to a LogPoll: empty when none came in time.
type LogRequests struct {
	Requests []LogRequest `json:"requests"`
}

// AllocRef names one allocation of a job's latest run and where it ran,
// kept after the run ends so its logs can still be found on the node.
type AllocRef struct {
	ID     string `json:"id"`
	NodeID string `json:"node_id"`
}
