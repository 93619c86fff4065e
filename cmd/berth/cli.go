package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/client"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

// connFlags are the server address and token every API command takes.
// Each comes from its flag, else BERTH_ADDR / BERTH_TOKEN, else the CLI
// config file (`berth dev` writes one), else the local server's defaults.
type connFlags struct{ addr, token string }

func (c *connFlags) add(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&c.addr, "server", "", "berth server address (default $BERTH_ADDR, the config file, else 127.0.0.1:7070)")
	cmd.PersistentFlags().StringVar(&c.token, "token", "", "bearer token (default $BERTH_TOKEN, the config file, else <data-dir>/admin.token)")
}

func (c *connFlags) client() (*client.Client, error) {
	addr, token := c.addr, c.token
	if addr == "" {
		addr = os.Getenv("BERTH_ADDR")
	}
	if token == "" {
		token = os.Getenv("BERTH_TOKEN")
	}
	if addr == "" || token == "" {
		cfg, err := loadConfig()
		if err != nil {
			return nil, err
		}
		if addr == "" {
			addr = cfg.Server
		}
		if token == "" {
			token = cfg.Token
		}
	}
	if addr == "" {
		addr = "127.0.0.1:7070"
	}
	if token == "" {
		b, err := os.ReadFile(filepath.Join(defaultDataDir(), "admin.token"))
		if err != nil {
			return nil, fmt.Errorf("no token: pass --token, set BERTH_TOKEN, run `berth dev` (it writes %s), or run this where `berth server` saved %s",
				configPath(), filepath.Join(defaultDataDir(), "admin.token"))
		}
		token = strings.TrimSpace(string(b))
	}
	return client.New(addr, token), nil
}

// outFlag is -o table|json|yaml.
type outFlag struct{ format string }

func (o *outFlag) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.format, "output", "o", "table", "output format: table, wide (a table with more columns), json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"table", "wide", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp
	})
}

func (o *outFlag) check() error {
	switch o.format {
	case "table", "wide", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output: %q: expected table, wide, json or yaml", o.format)
}

// wide says the command was asked for -o wide: its table adds columns.
func wide(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("output")
	return f != nil && f.Value.String() == "wide"
}

// print writes v as JSON or YAML, or calls table with a tabwriter.
func (o *outFlag) print(w io.Writer, v any, table func(tw *tabwriter.Writer)) error {
	switch o.format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		// Through JSON, so YAML keys are the API's field names.
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var generic any
		if err := yaml.Unmarshal(b, &generic); err != nil {
			return err
		}
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		return enc.Encode(generic)
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	table(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, escapeTable(buf.String()))
	return err
}

// escapeTable escapes whatever a table still holds that a terminal would
// act on (control characters, bidirectional overrides) keeping its tabs
// and newlines: the server refuses such names now, but a table may still
// meet one written before, and it must not rewrite the screen.
func escapeTable(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		cells := strings.Split(l, "\t")
		for j, c := range cells {
			cells[j] = api.Escape(c)
		}
		lines[i] = strings.Join(cells, "\t")
	}
	return strings.Join(lines, "\n")
}

// age is a short, squeue-like duration.
func age(since time.Time) string {
	if since.IsZero() {
		return "-"
	}
	d := time.Since(since)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// dash is a table cell of text a user wrote: "-" when empty, escaped
// (a newline or tab in it must not make a row or a column).
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return api.Escape(s)
}

// complete suggests ids from the server for a command's first argument
// (shell completion): list returns the candidates. A server that does
// not answer within two seconds suggests nothing, rather than hang the
// shell.
func complete(list func(ctx context.Context, c *client.Client) []string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 && !strings.HasSuffix(cmd.Use, "...") {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var conn connFlags // the group's --server and --token, as parsed
		if f := cmd.Flags().Lookup("server"); f != nil {
			conn.addr = f.Value.String()
		}
		if f := cmd.Flags().Lookup("token"); f != nil {
			conn.token = f.Value.String()
		}
		c, err := conn.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var out []cobra.Completion
		seen := map[string]bool{}
		for _, s := range list(ctx, c) {
			if strings.HasPrefix(s, prefix) && !seen[s] && strings.IndexFunc(s, api.Unprintable) < 0 {
				seen[s] = true
				out = append(out, s)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// jobNames are the unfinished jobs' ids and names.
func jobNames(ctx context.Context, c *client.Client) []string {
	var l api.JobList
	if c.Do(ctx, "GET", "/v1/jobs?state=pending,running", nil, &l) != nil {
		return nil
	}
	var out []string
	for _, j := range l.Jobs {
		if !j.State.Terminal() {
			out = append(out, j.ID)
			if j.Name != "" {
				out = append(out, j.Name)
			}
		}
	}
	return out
}

func deploymentNames(ctx context.Context, c *client.Client) []string {
	var l api.DeploymentList
	if c.Do(ctx, "GET", "/v1/deployments", nil, &l) != nil {
		return nil
	}
	var out []string
	for _, d := range l.Deployments {
		out = append(out, d.ID)
	}
	return out
}

func nodeNames(ctx context.Context, c *client.Client) []string {
	var l api.NodeList
	if c.Do(ctx, "GET", "/v1/nodes", nil, &l) != nil {
		return nil
	}
	var out []string
	for _, n := range l.Nodes {
		out = append(out, n.ID)
	}
	return out
}

// completeArgs gives the commands that take an id their suggestions.
func completeArgs(root *cobra.Command) {
	by := map[string]func(context.Context, *client.Client) []string{
		"job show": jobNames, "job cancel": jobNames, "job logs": jobNames,
		"deploy scale": deploymentNames, "deploy delete": deploymentNames, "deploy logs": deploymentNames,
		"nodes drain": nodeNames, "nodes undrain": nodeNames, "nodes quarantine": nodeNames, "nodes unquarantine": nodeNames,
	}
	for _, group := range root.Commands() {
		for _, c := range group.Commands() {
			if list, ok := by[group.Name()+" "+c.Name()]; ok {
				c.ValidArgsFunction = complete(list)
			}
		}
	}
}
