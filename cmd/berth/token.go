package main

import (
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/spf13/cobra"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage API tokens: create, list, revoke"}
	var conn connFlags
	conn.add(cmd)
	var req api.TokenRequest
	var out outFlag
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token for a role: admin, team:<name>, autoscaler:<deployment>, agent:<node>",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := conn.client()
			if err != nil {
				return err
			}
			t, err := c.NewToken(cmd.Context(), req)
			if err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), t, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "token %s for %s (shown once):\n  %s\n", t.ID, t.Role, t.Secret)
				if t.ExpiresAt != nil {
					fmt.Fprintf(tw, "expires %s\n", t.ExpiresAt.Local().Format(time.RFC3339))
				}
			})
		},
	}
	out.add(create)
	create.Flags().StringVar(&req.Role, "role", "", "admin, team:<name>, team:<org>/<team>, autoscaler:<deployment> or agent:<node>")
	create.Flags().StringVar(&req.Name, "name", "", "a note saying what the token is for")
	create.Flags().StringVar(&req.TTL, "ttl", "", "how long the token is valid, such as 24h or 720h (default: no expiry)")
	create.MarkFlagRequired("role")

	ls := simple(&conn, "ls", "List tokens (never their secrets)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			var list api.TokenList
			if err := do(cmd.Context(), "GET", "/v1/tokens", nil, &list); err != nil {
				return nil, nil, err
			}
			return list, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "ID\tROLE\tNAME\tCREATED\tEXPIRES")
				for _, t := range list.Tokens {
					exp := "never"
					switch {
					case t.Expired:
						exp = "expired " + t.ExpiresAt.Local().Format(time.RFC3339)
					case t.ExpiresAt != nil:
						exp = t.ExpiresAt.Local().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, dash(t.Role), dash(t.Name), t.CreatedAt.Local().Format(time.RFC3339), exp)
				}
			}, nil
		})
	revoke := simple(&conn, "revoke <id>", "Revoke a token by its id (berth token ls): every server refuses it at once", cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			var t api.Token
			if err := do(cmd.Context(), "DELETE", "/v1/tokens/"+url.PathEscape(args[0]), nil, &t); err != nil {
				return nil, nil, err
			}
			return t, func(tw *tabwriter.Writer) { fmt.Fprintf(tw, "revoked %s (%s)\n", t.ID, t.Role) }, nil
		})
	cmd.AddCommand(create, ls, revoke)
	return cmd
}
