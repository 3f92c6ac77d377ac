// Package pluginpb holds the generated protobuf and gRPC code of keel's
// plugin wire protocol (keelplugin.proto). The generated files are
// committed so no build needs protoc. They were made with protoc 3.21.12,
// protoc-gen-go v1.36.12 and protoc-gen-go-grpc v1.6.2:
//
//	apt-get install -y protobuf-compiler
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
//	go generate ./internal/pluginpb
package pluginpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative keelplugin.proto
