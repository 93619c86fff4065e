// Package ctrtest is what the container driver's tests share: a real
// podman on the test machine, its runtime and options there, and an image
// built without a registry from Debian's busybox-static. It is for tests
// only; nothing in berth imports it.
package ctrtest
