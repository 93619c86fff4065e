// Package server is berth's HTTP face: the /v1 API, bearer-token auth with
// roles (admin, team:<name>, autoscaler:<deployment>, agent:<node>),
// admission, the audit log, /metrics, /healthz and /readyz. It runs the
// leader election and, while leading, the control loop.
//
// Handlers translate between the wire (package api) and the controller;
// they hold no scheduling logic. A refused request changes nothing: every
// check happens before the controller is called, and the controller's
// writes are single transactions.
package server
