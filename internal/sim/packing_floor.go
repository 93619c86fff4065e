package sim

import "sort"

// ShareFloor is a floor under every online policy's unallocated % at
// 100% arrived, in the GPU dimension alone: the fractions that have
// arrived by then, packed offline by best-fit decreasing, leave this much
// of capacity free on the GPUs they share (as a percent of capacity).
// Only smaller fractions can use what a fraction leaves on its GPU, so
// no placement of the same fractions, online or not, does much better;
// an online policy, which sees them one at a time and must also fit CPU
// and memory, does worse. On openb the floor is about 4%: most of it is
// the 190 milli beside each of the trace's 1,078 810-milli tasks.
func ShareFloor(nodes []PackNode, list []PackPod) float64 {
	var capacity, arrived int64
	for _, n := range nodes {
		capacity += int64(n.GPUs) * 1000
	}
	var shares []int
	for _, p := range list {
		if arrived += p.Demand(); arrived > capacity {
			break
		}
		if p.Sharing() {
			shares = append(shares, p.GPUMilli)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(shares)))
	// open[f] counts GPUs with f milli free and some used; best fit is the
	// smallest f that holds the share.
	var open [1001]int
	for _, m := range shares {
		f := m
		for f < 1000 && open[f] == 0 {
			f++
		}
		if f < 1000 {
			open[f]--
		}
		open[f-m]++
	}
	var waste int64
	for f, c := range open[:1000] {
		waste += int64(f * c)
	}
	return 100 * float64(waste) / float64(capacity)
}
