// Package namesrv is keel's stateless RocketMQ name server and the
// broker-side registrar that keeps a broker registered with a list of them.
//
// A name server knows nothing of its peers and stores nothing on disk:
// every broker registers with every name server (REGISTER_BROKER, 103) and
// repeats it every 30 s; a name server forgets a broker that stayed silent
// for 120 s, whose registration connection closed, or that unregistered
// (UNREGISTER_BROKER, 104). Routes (GET_ROUTEINFO_BY_TOPIC, 105) span every
// broker group holding the topic, as RocketMQ's RouteInfoManager builds
// them (see ../../../shared/reference/rocketmq-broker-features.md §6).
//
// Topic data of a group comes from one member, its source: the master
// (broker id 0), or when the group has no master its smallest id (RocketMQ's
// prime slave), with the write permission removed so that clients keep
// reading from the slave but never write to it. The source's last
// registration carries its whole topic table; a topic it no longer lists
// loses that group's queues (RocketMQ with deleteTopicWithBrokerRegistration).
//
// # Files
//
//	registration.go  Registration and RegisterResult, one type for both paths
//	header.go        request and response headers of 103, 104, 322, 105, 216
//	body.go          RegisterBrokerBody, JSON form
//	bodyzlib.go      RegisterBrokerBody, zlib-compressed form
//	registry.go      the state: clusters, groups, live brokers; its rules
//	route.go         route, cluster-info and topic-list bodies
//	server.go        Server: configuration, in-process API, expiry scan
//	brokers.go       Server.Brokers: what is registered, for status pages
//	handlers.go      Server's wire handlers
//	client.go        the registrar's persistent connection to a name server
//	registrar.go     Registrar: periodic and triggered registration
package namesrv
