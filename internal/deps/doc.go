// Package deps holds the import rules of the module as a test: which relaybot package may
// import which (deps_test.go). It has no code of its own.
package deps
