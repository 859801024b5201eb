// Package bus is manifold's only door to NATS: the embedded server,
// connection options, provisioning of the JetStream streams, key-value
// buckets and object store, subject names, message envelopes and W3C trace
// context in message headers.
//
// Nothing outside bus imports nats.go's jetstream package; callers use the
// role types here (Bus, Bucket, TaskConsumer, Delivery) and the errors
// translated at this boundary (ErrNotFound, ErrRevisionMismatch, ...). bus
// does not log: it returns errors.
package bus
