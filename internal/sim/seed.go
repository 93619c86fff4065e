package sim

import (
	"bytes"
	_ "embed"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/berthsched/berth/internal/model"
)

//go:embed seed.yaml
var seedDefaults []byte

// SeedDefaults is the documented default configuration of the seed
// workload (seed.yaml).
func SeedDefaults() []byte { return seedDefaults }

// SeedConfig parameterises the seed workload; seed.yaml documents every
// field.
type SeedConfig struct {
	Fleet         FleetConfig     `yaml:"fleet"`
	Days          float64         `yaml:"days"`
	Utilization   float64         `yaml:"utilization"`
	TrainingShare float64         `yaml:"training_share"`
	Inference     InferenceConfig `yaml:"inference"`
	Training      TrainingConfig  `yaml:"training"`
	Storage       StorageConfig   `yaml:"storage"`
	// SmallPoolNodes is berth's operator setting for the small pool.
	SmallPoolNodes int `yaml:"small_pool_nodes"`
}

// StorageConfig is the checkpoint storage (R3): its bandwidth and the
// episodes when it degrades (a Poisson process of mean gap Every, each
// lasting and delivering a fraction drawn uniformly from the ranges).
type StorageConfig struct {
	BandwidthGBps float64           `yaml:"bandwidth_gbps"`
	Degradations  DegradationConfig `yaml:"degradations"`
}

type DegradationConfig struct {
	Every  time.Duration    `yaml:"every"`
	Length [2]time.Duration `yaml:"length"`
	Factor [2]float64       `yaml:"factor"`
}

type FleetConfig struct {
	Pods             int    `yaml:"pods"`
	NodesPerPod      int    `yaml:"nodes_per_pod"`
	GPUsPerNode      int    `yaml:"gpus_per_node"`
	Model            string `yaml:"model"`
	CPUMilliPerNode  int64  `yaml:"cpu_milli_per_node"`
	MemoryMiBPerNode int64  `yaml:"memory_mib_per_node"`
}

type InferenceConfig struct {
	BusinessStartHour int             `yaml:"business_start_hour"`
	BusinessEndHour   int             `yaml:"business_end_hour"`
	Trough            float64         `yaml:"trough"`
	Weekend           float64         `yaml:"weekend"`
	Step              time.Duration   `yaml:"step"`
	Services          []ServiceConfig `yaml:"services"`
}

type ServiceConfig struct {
	Name  string  `yaml:"name"`
	GPUs  int     `yaml:"gpus"`
	Min   int     `yaml:"min"`
	Max   int     `yaml:"max"`
	Share float64 `yaml:"share"`
	// Load is the model load time range: placement to ready.
	Load [2]time.Duration `yaml:"load"`
}

type TrainingConfig struct {
	Spike SpikeConfig `yaml:"spike"`
	// DurableEvery is how often running jobs write a durable checkpoint.
	DurableEvery time.Duration `yaml:"durable_every"`
	Classes      []ClassConfig `yaml:"classes"`
}

type SpikeConfig struct {
	Every  time.Duration `yaml:"every"`
	Length time.Duration `yaml:"length"`
	Factor float64       `yaml:"factor"`
}

type ClassConfig struct {
	Name               string     `yaml:"name"`
	GPUs               int        `yaml:"gpus"`
	Topology           string     `yaml:"topology"`
	Share              float64    `yaml:"share"`
	Runtime            [2]float64 `yaml:"runtime"`
	Priority           int        `yaml:"priority"`
	CheckpointGB       float64    `yaml:"checkpoint_gb"`
	Preemptible        bool       `yaml:"preemptible"`
	BusinessHours      bool       `yaml:"business_hours"`
	DeclaresMaxRuntime bool       `yaml:"declares_max_runtime"`
	// Elastic is the share of the class's jobs that are elastic (§9.4),
	// running between half their GPUs (whole nodes; for a `node` class,
	// GPUs of the one node) and all of them;
	// chosen by a hash of the job's id, so the jobs are the same ones
	// whatever the share.
	Elastic float64 `yaml:"elastic"`
}

// LoadSeedConfig reads the defaults, then overlays the file at path (if
// any). Unknown fields are errors that list the valid ones.
func LoadSeedConfig(path string) (SeedConfig, error) { return loadSeed(seedVariants["seed"], path) }

func loadSeed(variant func(*SeedConfig), path string) (SeedConfig, error) {
	var c SeedConfig
	if err := decodeStrict(seedDefaults, "seed.yaml", &c); err != nil {
		return c, err
	}
	variant(&c)
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return c, err
		}
		if len(bytes.TrimSpace(b)) > 0 {
			// A list in the file replaces the default list whole.
			var over SeedConfig
			if err := decodeStrict(b, path, &over); err != nil {
				return c, err
			}
			if len(over.Inference.Services) > 0 {
				c.Inference.Services = nil
			}
			if len(over.Training.Classes) > 0 {
				c.Training.Classes = nil
			}
			if err := decodeStrict(b, path, &c); err != nil {
				return c, err
			}
		}
	}
	return c, c.validate()
}

var unknownField = regexp.MustCompile(`line (\d+): field (\S+) not found in type (\S+)`)

// decodeStrict decodes YAML, refusing unknown fields and naming the valid
// ones.
func decodeStrict(b []byte, name string, out any) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	err := dec.Decode(out)
	if err == nil || err.Error() == "EOF" {
		return nil
	}
	msg := err.Error()
	if m := unknownField.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s:%s: unknown field %q; valid fields here: %s", name, m[1], m[2], strings.Join(fieldsOf(m[3]), ", "))
	}
	return fmt.Errorf("%s: %s", name, strings.TrimPrefix(msg, "yaml: "))
}

// fieldsOf lists the yaml names of the named config type's fields.
func fieldsOf(typeName string) []string {
	types := []any{SeedConfig{}, FleetConfig{}, InferenceConfig{}, ServiceConfig{}, TrainingConfig{}, SpikeConfig{}, ClassConfig{}, StorageConfig{}, DegradationConfig{}}
	for _, t := range types {
		rt := reflect.TypeOf(t)
		if "sim."+rt.Name() != typeName {
			continue
		}
		var out []string
		for i := 0; i < rt.NumField(); i++ {
			out = append(out, strings.Split(rt.Field(i).Tag.Get("yaml"), ",")[0])
		}
		sort.Strings(out)
		return out
	}
	return nil
}

func (c *SeedConfig) validate() error {
	f := c.Fleet
	switch {
	case f.Pods < 1 || f.NodesPerPod < 1:
		return fmt.Errorf("fleet.pods and fleet.nodes_per_pod: must be at least 1 (got %d, %d)", f.Pods, f.NodesPerPod)
	case f.GPUsPerNode < 1 || f.GPUsPerNode > model.MaxGPUsPerNode:
		return fmt.Errorf("fleet.gpus_per_node: %d is not between 1 and %d", f.GPUsPerNode, model.MaxGPUsPerNode)
	case c.Days <= 0:
		return fmt.Errorf("days: %g must be positive", c.Days)
	case c.Utilization <= 0 || c.Utilization > 2:
		return fmt.Errorf("utilization: %g must be in (0, 2]", c.Utilization)
	case c.TrainingShare < 0 || c.TrainingShare > 1:
		return fmt.Errorf("training_share: %g must be in [0, 1]", c.TrainingShare)
	case c.Inference.Step <= 0:
		return fmt.Errorf("inference.step: %s must be positive", c.Inference.Step)
	}
	for i, s := range c.Inference.Services {
		if s.Name == "" || s.GPUs < 1 || s.Max < s.Min || s.Share < 0 {
			return fmt.Errorf("inference.services[%d]: needs a name, gpus ≥ 1, max ≥ min and share ≥ 0", i)
		}
		if s.Load[0] < 0 || s.Load[1] < s.Load[0] {
			return fmt.Errorf("inference.services[%d].load: [%s, %s] must be [min, max] with 0 ≤ min ≤ max", i, s.Load[0], s.Load[1])
		}
	}
	st := c.Storage
	switch d := st.Degradations; {
	case st.BandwidthGBps <= 0:
		return fmt.Errorf("storage.bandwidth_gbps: %g must be positive", st.BandwidthGBps)
	case d.Every < 0:
		return fmt.Errorf("storage.degradations.every: %s must not be negative (0: none)", d.Every)
	case d.Every > 0 && (d.Length[0] <= 0 || d.Length[1] < d.Length[0]):
		return fmt.Errorf("storage.degradations.length: [%s, %s] must be [min, max] with 0 < min ≤ max", d.Length[0], d.Length[1])
	case d.Every > 0 && (d.Factor[0] <= 0 || d.Factor[1] < d.Factor[0] || d.Factor[1] > 1):
		return fmt.Errorf("storage.degradations.factor: [%g, %g] must be [min, max] with 0 < min ≤ max ≤ 1", d.Factor[0], d.Factor[1])
	case c.SmallPoolNodes < 0:
		return fmt.Errorf("small_pool_nodes: %d must not be negative", c.SmallPoolNodes)
	case c.Training.DurableEvery < 0:
		return fmt.Errorf("training.durable_every: %s must not be negative", c.Training.DurableEvery)
	}
	for i, k := range c.Training.Classes {
		if _, err := model.ParseTopology(k.Topology); err != nil {
			return fmt.Errorf("training.classes[%d].%w", i, err)
		}
		if k.Name == "" || k.GPUs < 1 || k.Share < 0 || k.Runtime[0] <= 0 || k.Runtime[1] < k.Runtime[0] {
			return fmt.Errorf("training.classes[%d] (%s): needs a name, gpus ≥ 1, share ≥ 0 and runtime [min, max] with 0 < min ≤ max", i, k.Name)
		}
	}
	return nil
}

// Seed generates the seed workload: the fleet, training arrivals (Poisson,
// rate set so training gets training_share of the offered GPU-hours, with
// the pre-deadline spike), and inference services whose replicas follow
// the diurnal curve.
func Seed(c SeedConfig, seed uint64) *Workload {
	w := &Workload{Name: "seed", Horizon: time.Duration(c.Days * 24 * float64(time.Hour))}
	f := c.Fleet
	for p := 0; p < f.Pods; p++ {
		for n := 0; n < f.NodesPerPod; n++ {
			w.Nodes = append(w.Nodes, model.Node{ID: fmt.Sprintf("n%03d", p*f.NodesPerPod+n), Pod: fmt.Sprintf("pod-%c", 'a'+rune(p%26)),
				Model: f.Model, GPUs: f.GPUsPerNode, CPUMilli: f.CPUMilliPerNode, MemoryMiB: f.MemoryMiBPerNode, Health: model.HealthHealthy, BootEpoch: 1})
		}
	}
	capacity := float64(len(w.Nodes)*f.GPUsPerNode) * w.Horizon.Hours()
	offered := capacity * c.Utilization
	w.Services = seedServices(c, offered*(1-c.TrainingShare), w.Horizon)
	w.Stream = seedJobs(c, seed, offered*c.TrainingShare, w.Horizon)
	w.Storage = seedStorage(c.Storage, seed, w.Horizon)
	w.SmallPoolNodes = c.SmallPoolNodes
	return w
}

// seedStorage draws the storage's degradation episodes from their own
// generator, so they do not move when the job mix changes.
func seedStorage(c StorageConfig, seed uint64, horizon time.Duration) StorageSpec {
	s := StorageSpec{Bandwidth: c.BandwidthGBps * 1e9}
	d := c.Degradations
	if d.Every <= 0 {
		return s
	}
	rng := rand.New(rand.NewPCG(seed, 0x5707))
	uniform := func(lo, hi float64) float64 { return lo + rng.Float64()*(hi-lo) }
	t := time.Duration(0)
	for {
		t += time.Duration(rng.ExpFloat64() * float64(d.Every))
		if t >= horizon {
			return s
		}
		length := time.Duration(uniform(float64(d.Length[0]), float64(d.Length[1])))
		s.Episodes = append(s.Episodes, Degradation{At: t, Until: min(t+length, horizon), Factor: uniform(d.Factor[0], d.Factor[1])})
		t += length
	}
}

// diurnal is the inference demand shape at t: 1 at a weekday's peak.
func diurnal(c InferenceConfig, t time.Duration) float64 {
	h := math.Mod(t.Hours(), 24)
	day := int(t.Hours()/24) % 7 // the run starts on a Monday
	peak := 1.0
	if day >= 5 {
		peak = c.Weekend
	}
	start, end := float64(c.BusinessStartHour), float64(c.BusinessEndHour)
	if h < start || h >= end {
		return c.Trough
	}
	// A smooth hump over business hours.
	x := (h - start) / (end - start)
	return c.Trough + (peak-c.Trough)*math.Sin(math.Pi*x)
}

func seedServices(c SeedConfig, gpuHours float64, horizon time.Duration) []ServiceSpec {
	ic := c.Inference
	var mean float64
	steps := int(horizon / ic.Step)
	for i := 0; i < steps; i++ {
		mean += diurnal(ic, time.Duration(i)*ic.Step)
	}
	mean /= float64(max(steps, 1))
	var out []ServiceSpec
	for _, s := range ic.Services {
		// peak replicas so that the mean over the run delivers its share.
		peak := s.Share * gpuHours / horizon.Hours() / float64(s.GPUs) / mean
		spec := ServiceSpec{ID: s.Name, Shape: model.Shape{GPUs: s.GPUs, Topology: model.TopologyNode}, Min: s.Min, Max: s.Max, Priority: 1000, Load: s.Load}
		last := -1
		for i := 0; i < steps; i++ {
			at := time.Duration(i) * ic.Step
			r := min(max(int(math.Round(peak*diurnal(ic, at))), s.Min), s.Max)
			if r != last {
				spec.Demand = append(spec.Demand, DemandPoint{At: at, Replicas: r})
				last = r
			}
		}
		out = append(out, spec)
	}
	return out
}

// classStream is one training class's Poisson arrivals, drawn as asked.
type classStream struct {
	k       ClassConfig
	rng     *rand.Rand
	rate    float64 // arrivals per open hour
	lo, hi  float64 // log runtime bounds
	t       float64 // hours: the last draw
	next    JobSpec
	has     bool
	n       int
	ic      InferenceConfig
	spike   SpikeConfig
	horizon time.Duration
	durable time.Duration
}

// advance draws the class's next job, if it arrives before the horizon.
func (cs *classStream) advance() {
	cs.has = false
	for {
		cs.t += cs.rng.ExpFloat64() / (cs.rate * spikeFactor(cs.spike, cs.t))
		at := time.Duration(cs.t * float64(time.Hour))
		if at >= cs.horizon {
			return
		}
		if cs.k.BusinessHours && !businessHours(cs.ic, at) {
			continue
		}
		k := cs.k
		hours := math.Exp(cs.lo + cs.rng.Float64()*(cs.hi-cs.lo))
		cs.next = JobSpec{ID: fmt.Sprintf("%s-%06d", k.Name, cs.n), Submit: at, Work: time.Duration(hours * float64(time.Hour)),
			Shape: model.Shape{GPUs: k.GPUs, Topology: model.Topology(k.Topology)}, Team: k.Name, Priority: k.Priority,
			Preemptible: k.Preemptible, CheckpointBytes: int64(k.CheckpointGB * 1e9), DurableEvery: cs.durable}
		if k.DeclaresMaxRuntime {
			cs.next.MaxRuntime = time.Duration(k.Runtime[1] * float64(time.Hour))
		}
		if elasticPick(cs.next.ID, k.Elastic) {
			cs.next.Elastic = elasticRange(k.GPUs, model.Topology(k.Topology))
		}
		cs.n++
		cs.has = true
		return
	}
}

// seedSource merges the classes' streams in submit order. Each class has
// its own generator seeded from (seed, class), so the sequence is the same
// on every run and nothing is held but one pending job per class: a month
// at 100k GPUs (millions of jobs) streams in constant memory.
type seedSource struct{ classes []*classStream }

func (s *seedSource) Next() (JobSpec, bool) {
	var best *classStream
	for _, c := range s.classes {
		if c.has && (best == nil || c.next.Submit < best.next.Submit) {
			best = c
		}
	}
	if best == nil {
		return JobSpec{}, false
	}
	j := best.next
	best.advance()
	return j, true
}

func seedJobs(c SeedConfig, seed uint64, gpuHours float64, horizon time.Duration) func() JobSource {
	var total float64
	for _, k := range c.Training.Classes {
		total += k.Share
	}
	return func() JobSource {
		src := &seedSource{}
		for ci, k := range c.Training.Classes {
			if total == 0 || k.Share == 0 {
				continue
			}
			cs := &classStream{k: k, rng: rand.New(rand.NewPCG(seed, uint64(ci)+1)), ic: c.Inference, spike: c.Training.Spike, horizon: horizon, durable: c.Training.DurableEvery}
			cs.lo, cs.hi = math.Log(k.Runtime[0]), math.Log(k.Runtime[1])
			meanHours := k.Runtime[0]
			if cs.hi > cs.lo {
				meanHours = (k.Runtime[1] - k.Runtime[0]) / (cs.hi - cs.lo) // mean of a log-uniform
			}
			open := 1.0
			if k.BusinessHours {
				open = float64(c.Inference.BusinessEndHour-c.Inference.BusinessStartHour) / 24 * 5 / 7
			}
			// Arrivals per open hour so the class gets its share of GPU-hours.
			cs.rate = k.Share / total * gpuHours / (float64(k.GPUs) * meanHours) / (horizon.Hours() * open)
			cs.advance()
			src.classes = append(src.classes, cs)
		}
		return src
	}
}

func spikeFactor(s SpikeConfig, hours float64) float64 {
	if s.Every <= 0 || s.Length <= 0 || s.Factor <= 0 {
		return 1
	}
	// The spike sits at the end of each period: the days before a deadline.
	if math.Mod(hours, s.Every.Hours()) >= s.Every.Hours()-s.Length.Hours() {
		return s.Factor
	}
	return 1
}

func businessHours(c InferenceConfig, t time.Duration) bool {
	h := int(math.Mod(t.Hours(), 24))
	day := int(t.Hours()/24) % 7
	return day < 5 && h >= c.BusinessStartHour && h < c.BusinessEndHour
}
