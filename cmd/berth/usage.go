package main

import (
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/berthsched/berth/internal/api"
	"github.com/spf13/cobra"
)

func newUsageCmd() *cobra.Command {
	var conn connFlags
	var since, by string
	cmd := simple(&conn, "usage", "GPU-hours, preemptions suffered and queue time by team, org, user or kind (like sacct/sreport)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			q := url.Values{"since": {since}, "by": {by}}
			var u api.Usage
			if err := do(cmd.Context(), http.MethodGet, "/v1/usage?"+q.Encode(), nil, &u); err != nil {
				return nil, nil, err
			}
			return u, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "%s\tJOBS\tREPLICAS\tGPU-H\tRUNNING GPU-H\tPREEMPTED\tQUEUE P50\tQUEUE P90\n", map[string]string{
					"team": "TEAM", "org": "ORG", "user": "USER", "kind": "KIND"}[u.By])
				for _, r := range u.Rows {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%d\t%s\t%s\n", api.Escape(r.Key), r.Jobs, r.Replicas, r.GPUHours, r.RunningGPUHours,
						r.Preemptions, hours(r.QueueP50Hours, r.Jobs), hours(r.QueueP90Hours, r.Jobs))
				}
				if len(u.Rows) == 0 {
					fmt.Fprintf(tw, "(no work since %s)\n", u.Since.Local().Format("2006-01-02 15:04"))
				}
			}, nil
		})
	cmd.Flags().StringVar(&since, "since", "7d", "window: a duration (7d, 12h, 30m) or an RFC 3339 time")
	cmd.Flags().StringVar(&by, "by", "team", "group by team, org, user or kind")
	_ = cmd.RegisterFlagCompletionFunc("by", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return api.UsageGroups, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// hours prints a queue figure, "-" with no finished job to take it from.
func hours(h float64, jobs int) string {
	if jobs == 0 {
		return "-"
	}
	if h < 1 {
		return fmt.Sprintf("%.0fm", h*60)
	}
	return fmt.Sprintf("%.1fh", h)
}
