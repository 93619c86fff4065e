package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage API tokens"}
	var conn connFlags
	var role, name, output string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token for a role: admin, team:<name>, autoscaler:<deployment>, agent:<node>",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output: %q: expected table or json", output)
			}
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
