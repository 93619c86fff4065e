// Package client is the typed Go client of berth's /v1 API, used by the
// CLI, the node agent and the load generator. Errors from the server come
// back as *api.Error with the status code attached, so a caller can say
// what to do (start a server, which scope was missing).
package client
