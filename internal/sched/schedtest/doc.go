// Package schedtest builds fleets, jobs and deployments for the scheduling
// core's tests, benchmarks and the simulator's fixtures. It holds no
// scheduling logic.
package schedtest
