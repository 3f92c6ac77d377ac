package remoting

// Request codes (Apache RocketMQ RequestCode). Only those keel handles or
// sends are listed.
const (
	// CodeSendMessage is SEND_MESSAGE: one message with the long-name header.
	CodeSendMessage int16 = 10
	// CodePullMessage is PULL_MESSAGE, usually long-polling.
	CodePullMessage int16 = 11
	// CodeQueryMessage is QUERY_MESSAGE: find messages by key.
	CodeQueryMessage int16 = 12
	// CodeQueryConsumerOffset is QUERY_CONSUMER_OFFSET.
	CodeQueryConsumerOffset int16 = 14
	// CodeUpdateConsumerOffset is UPDATE_CONSUMER_OFFSET.
	CodeUpdateConsumerOffset int16 = 15
	// CodeSearchOffsetByTimestamp is SEARCH_OFFSET_BY_TIMESTAMP.
	CodeSearchOffsetByTimestamp int16 = 29
	// CodeGetMaxOffset is GET_MAX_OFFSET.
	CodeGetMaxOffset int16 = 30
	// CodeGetMinOffset is GET_MIN_OFFSET.
	CodeGetMinOffset int16 = 31
	// CodeViewMessageByID is VIEW_MESSAGE_BY_ID: fetch one message by its
	// offset message id.
	CodeViewMessageByID int16 = 33
	// CodeHeartBeat is HEART_BEAT: producer and consumer group membership.
	CodeHeartBeat int16 = 34
	// CodeUnregisterClient is UNREGISTER_CLIENT.
	CodeUnregisterClient int16 = 35
	// CodeConsumerSendMsgBack is CONSUMER_SEND_MSG_BACK: a consumer hands a
	// message back for redelivery.
	CodeConsumerSendMsgBack int16 = 36
	// CodeEndTransaction is END_TRANSACTION: a producer commits or rolls
	// back a transactional message.
	CodeEndTransaction int16 = 37
	// CodeGetConsumerListByGroup is GET_CONSUMER_LIST_BY_GROUP.
	CodeGetConsumerListByGroup int16 = 38
	// CodeCheckTransactionState is CHECK_TRANSACTION_STATE, sent by the
	// broker to a producer about an undecided transactional message.
	CodeCheckTransactionState int16 = 39
	// CodeNotifyConsumerIDsChanged is NOTIFY_CONSUMER_IDS_CHANGED, sent by
	// the broker to a group's members when membership changes.
	CodeNotifyConsumerIDsChanged int16 = 40
	// CodeCheckClientConfig is CHECK_CLIENT_CONFIG: a Java consumer checks
	// its subscription (an SQL92 expression compiles) at start.
	CodeCheckClientConfig int16 = 46
	// CodeUpdateAndCreateTopic is UPDATE_AND_CREATE_TOPIC (admin).
	CodeUpdateAndCreateTopic int16 = 17
	// CodeGetAllTopicConfig is GET_ALL_TOPIC_CONFIG (admin).
	CodeGetAllTopicConfig int16 = 21
	// CodeGetBrokerRuntimeInfo is GET_BROKER_RUNTIME_INFO (admin).
	CodeGetBrokerRuntimeInfo int16 = 28
	// CodeGetAllConsumerOffset is GET_ALL_CONSUMER_OFFSET (admin).
	CodeGetAllConsumerOffset int16 = 43
	// CodeUpdateAndCreateSubscriptionGroup is
	// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (admin).
	CodeUpdateAndCreateSubscriptionGroup int16 = 200
	// CodeGetAllSubscriptionGroupConfig is GET_ALL_SUBSCRIPTIONGROUP_CONFIG
	// (admin).
	CodeGetAllSubscriptionGroupConfig int16 = 201
	// CodeGetTopicStatsInfo is GET_TOPIC_STATS_INFO (admin).
	CodeGetTopicStatsInfo int16 = 202
	// CodeGetConsumerConnectionList is GET_CONSUMER_CONNECTION_LIST (admin).
	CodeGetConsumerConnectionList int16 = 203
	// CodeGetAllTopicListFromNameServer is
	// GET_ALL_TOPIC_LIST_FROM_NAMESERVER (name server).
	CodeGetAllTopicListFromNameServer int16 = 206
	// CodeDeleteSubscriptionGroup is DELETE_SUBSCRIPTIONGROUP (admin).
	CodeDeleteSubscriptionGroup int16 = 207
	// CodeGetConsumeStats is GET_CONSUME_STATS (admin).
	CodeGetConsumeStats int16 = 208
	// CodeDeleteTopicInBroker is DELETE_TOPIC_IN_BROKER (admin).
	CodeDeleteTopicInBroker int16 = 215
	// CodeDeleteTopicInNameServer is DELETE_TOPIC_IN_NAMESRV (name server).
	CodeDeleteTopicInNameServer int16 = 216
	// CodeGetRouteInfoByTopic is GET_ROUTEINFO_BY_TOPIC (name server).
	CodeGetRouteInfoByTopic int16 = 105
	// CodeGetBrokerClusterInfo is GET_BROKER_CLUSTER_INFO (name server).
	CodeGetBrokerClusterInfo int16 = 106
	// CodeSendMessageV2 is SEND_MESSAGE_V2: one message, short header names.
	CodeSendMessageV2 int16 = 310
	// CodeSendBatchMessage is SEND_BATCH_MESSAGE: a batch, short header
	// names, body in the client batch encoding.
	CodeSendBatchMessage int16 = 320
)

// Response codes (Apache RocketMQ ResponseCode / RemotingSysResponseCode).
const (
	// Success is SUCCESS.
	Success int16 = 0
	// SystemError is SYSTEM_ERROR.
	SystemError int16 = 1
	// SystemBusy is SYSTEM_BUSY.
	SystemBusy int16 = 2
	// RequestCodeNotSupported is REQUEST_CODE_NOT_SUPPORTED.
	RequestCodeNotSupported int16 = 3
	// TransactionFailed is TRANSACTION_FAILED.
	TransactionFailed int16 = 4
	// FlushDiskTimeout is FLUSH_DISK_TIMEOUT: stored, not yet durable.
	FlushDiskTimeout int16 = 10
	// SlaveNotAvailable is SLAVE_NOT_AVAILABLE: stored, no replica to wait for.
	SlaveNotAvailable int16 = 11
	// FlushSlaveTimeout is FLUSH_SLAVE_TIMEOUT: stored, replica did not ack
	// in time.
	FlushSlaveTimeout int16 = 12
	// MessageIllegal is MESSAGE_ILLEGAL: the message was rejected.
	MessageIllegal int16 = 13
	// ServiceNotAvailable is SERVICE_NOT_AVAILABLE (disk full, shutting
	// down, slave, ...).
	ServiceNotAvailable int16 = 14
	// VersionNotSupported is VERSION_NOT_SUPPORTED.
	VersionNotSupported int16 = 15
	// NoPermission is NO_PERMISSION.
	NoPermission int16 = 16
	// TopicNotExist is TOPIC_NOT_EXIST.
	TopicNotExist int16 = 17
	// TopicExistAlready is TOPIC_EXIST_ALREADY.
	TopicExistAlready int16 = 18
	// PullNotFound is PULL_NOT_FOUND: no new message; re-pull from
	// nextBeginOffset.
	PullNotFound int16 = 19
	// PullRetryImmediately is PULL_RETRY_IMMEDIATELY: nothing matched the
	// filter; re-pull from nextBeginOffset.
	PullRetryImmediately int16 = 20
	// PullOffsetMoved is PULL_OFFSET_MOVED: the requested offset is out of
	// range; the client resets to nextBeginOffset.
	PullOffsetMoved int16 = 21
	// QueryNotFound is QUERY_NOT_FOUND.
	QueryNotFound int16 = 22
	// SubscriptionParseFailed is SUBSCRIPTION_PARSE_FAILED.
	SubscriptionParseFailed int16 = 23
	// FilterDataNotExist is FILTER_DATA_NOT_EXIST: the consumer's
	// heartbeat subscription is SQL92 but did not compile.
	FilterDataNotExist int16 = 27
	// FilterDataNotLatest is FILTER_DATA_NOT_LATEST: the pull names a
	// newer subscription version than the last heartbeat brought.
	FilterDataNotLatest int16 = 28
	// SubscriptionNotExist is SUBSCRIPTION_NOT_EXIST.
	SubscriptionNotExist int16 = 24
	// SubscriptionNotLatest is SUBSCRIPTION_NOT_LATEST.
	SubscriptionNotLatest int16 = 25
	// SubscriptionGroupNotExist is SUBSCRIPTION_GROUP_NOT_EXIST.
	SubscriptionGroupNotExist int16 = 26
	// IllegalOperation is ILLEGAL_OPERATION: END_TRANSACTION came after
	// the transaction timeout.
	IllegalOperation int16 = 604
	// InvalidParameter is INVALID_PARAMETER: an admin request named a bad
	// topic or group, or a configuration breaking a table rule.
	InvalidParameter int16 = 29
	// ConsumerNotOnline is CONSUMER_NOT_ONLINE: the group has no live
	// consumer.
	ConsumerNotOnline int16 = 206
)

// Request codes of broker registration with stateless name servers
// (host/namesrv).
const (
	// CodeRegisterBroker is REGISTER_BROKER: a broker announces itself and
	// its topic table to a name server.
	CodeRegisterBroker int16 = 103
	// CodeUnregisterBroker is UNREGISTER_BROKER, sent by a broker at
	// shutdown.
	CodeUnregisterBroker int16 = 104
	// CodeQueryDataVersion is QUERY_DATA_VERSION: a broker asks whether the
	// name server holds an older topic-table version than its own.
	CodeQueryDataVersion int16 = 322
)

// Controller mode (issue #18, the raft controller in host/controller):
// request codes (RocketMQ RequestCode 904, 1001–1006) and the controller's
// response codes (RocketMQ ResponseCode 2000–2016).
const (
	// CodeBrokerHeartbeat is BROKER_HEARTBEAT: a broker's liveness and
	// log position, sent to the controller leader.
	CodeBrokerHeartbeat int16 = 904
	// CodeControllerAlterSyncStateSet is CONTROLLER_ALTER_SYNC_STATE_SET:
	// a master changes its group's SyncStateSet.
	CodeControllerAlterSyncStateSet int16 = 1001
	// CodeControllerElectMaster is CONTROLLER_ELECT_MASTER.
	CodeControllerElectMaster int16 = 1002
	// CodeControllerRegisterBroker is CONTROLLER_REGISTER_BROKER.
	CodeControllerRegisterBroker int16 = 1003
	// CodeControllerGetReplicaInfo is CONTROLLER_GET_REPLICA_INFO.
	CodeControllerGetReplicaInfo int16 = 1004
	// CodeControllerGetMetadataInfo is CONTROLLER_GET_METADATA_INFO.
	CodeControllerGetMetadataInfo int16 = 1005
	// CodeControllerGetSyncStateData is CONTROLLER_GET_SYNC_STATE_DATA.
	CodeControllerGetSyncStateData int16 = 1006

	// ControllerFencedMasterEpoch is CONTROLLER_FENCED_MASTER_EPOCH: the
	// request names an older master epoch than the controller's.
	ControllerFencedMasterEpoch int16 = 2000
	// ControllerFencedSyncStateSetEpoch is
	// CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH.
	ControllerFencedSyncStateSetEpoch int16 = 2001
	// ControllerInvalidMaster is CONTROLLER_INVALID_MASTER.
	ControllerInvalidMaster int16 = 2002
	// ControllerInvalidReplicas is CONTROLLER_INVALID_REPLICAS.
	ControllerInvalidReplicas int16 = 2003
	// ControllerMasterNotAvailable is CONTROLLER_MASTER_NOT_AVAILABLE.
	ControllerMasterNotAvailable int16 = 2004
	// ControllerInvalidRequest is CONTROLLER_INVALID_REQUEST.
	ControllerInvalidRequest int16 = 2005
	// ControllerBrokerNotAlive is CONTROLLER_BROKER_NOT_ALIVE.
	ControllerBrokerNotAlive int16 = 2006
	// ControllerNotLeader is CONTROLLER_NOT_LEADER: ask the leader.
	ControllerNotLeader int16 = 2007
	// ControllerBrokerNeedToBeRegistered is
	// CONTROLLER_BROKER_NEED_TO_BE_REGISTERED.
	ControllerBrokerNeedToBeRegistered int16 = 2010
	// ControllerMasterStillExist is CONTROLLER_MASTER_STILL_EXIST.
	ControllerMasterStillExist int16 = 2011
	// ControllerElectMasterFailed is CONTROLLER_ELECT_MASTER_FAILED.
	ControllerElectMasterFailed int16 = 2012
	// ControllerAlterSyncStateSetFailed is
	// CONTROLLER_ALTER_SYNC_STATE_SET_FAILED.
	ControllerAlterSyncStateSetFailed int16 = 2013
	// ControllerBrokerIDInvalid is CONTROLLER_BROKER_ID_INVALID.
	ControllerBrokerIDInvalid int16 = 2014
)

// Admin request codes of issue #17 (reset offset by time, consumers of a
// topic, store cleaning; RocketMQ's RequestCode).
const (
	// CodeInvokeBrokerToResetOffset is INVOKE_BROKER_TO_RESET_OFFSET:
	// move a group's offsets on a topic to the first message stored at or
	// after a time.
	CodeInvokeBrokerToResetOffset int16 = 222
	// CodeResetConsumerClientOffset is RESET_CONSUMER_CLIENT_OFFSET,
	// broker → consumer, oneway: the new offsets of a reset.
	CodeResetConsumerClientOffset int16 = 220
	// CodeQueryTopicConsumeByWho is QUERY_TOPIC_CONSUME_BY_WHO: the groups
	// consuming a topic.
	CodeQueryTopicConsumeByWho int16 = 300
	// CodeCleanExpiredConsumeQueue is CLEAN_EXPIRED_CONSUMEQUEUE.
	CodeCleanExpiredConsumeQueue int16 = 306
	// CodeCleanUnusedTopic is CLEAN_UNUSED_TOPIC.
	CodeCleanUnusedTopic int16 = 316
)

// Controller-mode codes keel refuses with REQUEST_CODE_NOT_SUPPORTED
// (issue #18; RocketMQ's RequestCode): host/controller says what keel
// does instead.
const (
	// CodeNotifyBrokerRoleChanged is NOTIFY_BROKER_ROLE_CHANGED,
	// controller → broker after an election.
	CodeNotifyBrokerRoleChanged int16 = 1008
	// CodeCleanBrokerData is CLEAN_BROKER_DATA, admin → controller.
	CodeCleanBrokerData int16 = 1011
	// CodeControllerGetNextBrokerID is CONTROLLER_GET_NEXT_BROKER_ID.
	CodeControllerGetNextBrokerID int16 = 1012
	// CodeControllerApplyBrokerID is CONTROLLER_APPLY_BROKER_ID.
	CodeControllerApplyBrokerID int16 = 1013
)
