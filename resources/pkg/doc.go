// Package pkg is the package resource type ("package", as in CCM): a
// package installed, at its newest version, at an exact version, or
// absent, through a provider chosen for the host: apt (dpkg-query,
// apt-cache, apt-get) on Debian and its derivatives, dnf (rpm, dnf) on
// Fedora and Enterprise Linux.
//
// Every command goes through Env.Runner, so tests replay outputs recorded
// from the real tools (testdata/), and every check and apply of a provider
// holds resources.LockPackageManager for that provider: one package-manager
// operation at a time in a worker.
//
// Package is a resources.Batcher: consecutive packages of one provider and
// operation (BatchKey) are installed or removed by one package-manager
// command (ApplyBatch), the lock held once for it.
package pkg
