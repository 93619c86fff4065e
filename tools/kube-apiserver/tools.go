//go:build tools

// Package tools pins the kube-apiserver that berth's Kubernetes tests run
// against. It is its own module so that berth's go.mod needs only
// client-go: Kubernetes' go.mod replaces every k8s.io staging module with
// a path inside its own repository, which a dependent cannot use, so this
// module requires each of them at the matching v0 release instead.
// scripts/kube-apiserver builds the binary from here into a cache keyed
// by version.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
