package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/berthsched/berth/internal/client"
	"github.com/spf13/cobra"
)

// connFlags are the server address and token every API command takes:
// flags, then BERTH_ADDR / BERTH_TOKEN, then the admin token a local
// server saved in its data dir.
type connFlags struct{ addr, token string }

func (c *connFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.addr, "server", "", "berth server address (default $BERTH_ADDR, else 127.0.0.1:7070)")
	cmd.Flags().StringVar(&c.token, "token", "", "bearer token (default $BERTH_TOKEN, else <data-dir>/admin.token)")
}

func (c *connFlags) client() (*client.Client, error) {
	addr, token := c.addr, c.token
	if addr == "" {
		addr = os.Getenv("BERTH_ADDR")
	}
	if addr == "" {
		addr = "127.0.0.1:7070"
	}
	if token == "" {
		token = os.Getenv("BERTH_TOKEN")
	}
	if token == "" {
		b, err := os.ReadFile(filepath.Join(defaultDataDir(), "admin.token"))
		if err != nil {
			return nil, fmt.Errorf("no token: pass --token, set BERTH_TOKEN, or run this where `berth server` saved %s", filepath.Join(defaultDataDir(), "admin.token"))
		}
		token = strings.TrimSpace(string(b))
	}
	return client.New(addr, token), nil
}

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage API tokens"}
	var conn connFlags
	var role, name, output string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token for a role: admin, team:<name>, autoscaler:<deployment>, agent:<node>",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			t, err := c.CreateToken(cmd.Context(), role, name)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(t)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s for %s (shown once):\n  %s\n", t.ID, t.Role, t.Secret)
			return nil
		},
	}
	conn.add(create)
	create.Flags().StringVar(&role, "role", "", "admin, team:<name>, autoscaler:<deployment> or agent:<node>")
	create.Flags().StringVar(&name, "name", "", "a note saying what the token is for")
	create.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	create.MarkFlagRequired("role")
	cmd.AddCommand(create)
	return cmd
}
