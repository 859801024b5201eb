package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	ctx := context.Background()
	switch os.Args[1] {
	case "server":
		port, _ := strconv.Atoi(os.Args[2])
		s, err := server.NewServer(&server.Options{Port: port, JetStream: true, StoreDir: os.Args[3], NoLog: true, NoSigs: true})
		if err != nil {
			panic(err)
		}
		s.Start()
		if !s.ReadyForConnections(5 * time.Second) {
			panic("not ready")
		}
		fmt.Println("ready")
		select {}
	case "worker", "client", "coreworker", "coreclient":
		nc, err := nats.Connect(os.Args[2])
		if err != nil {
			panic(err)
		}
		js, _ := jetstream.New(nc)
		st := jetstream.FileStorage
		if os.Args[3] == "mem" {
			st = jetstream.MemoryStorage
		}
		if os.Args[1] == "coreworker" {
			nc.Subscribe("core.req", func(m *nats.Msg) { m.Respond(make([]byte, 350)) })
			nc.Flush()
			fmt.Println("ready")
			select {}
		}
		if os.Args[1] == "coreclient" {
			d := []time.Duration{}
			task := make([]byte, 900)
			for i := range 2200 {
				t0 := time.Now()
				if _, err := nc.Request("core.req", task, time.Second); err != nil {
					panic(err)
				}
				if i >= 200 {
					d = append(d, time.Since(t0))
				}
			}
			slices.Sort(d)
			fmt.Println("core p50", d[len(d)/2], "p99", d[len(d)*99/100])
			return
		}
		if os.Args[1] == "worker" {
			for _, n := range []string{"T", "R"} {
				js.DeleteStream(ctx, n)
			}
			ret := jetstream.WorkQueuePolicy
			_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t"}, Retention: ret, Storage: st})
			if err != nil {
				panic(err)
			}
			_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"r"}, Storage: st})
			if err != nil {
				panic(err)
			}
			cons, err := js.CreateOrUpdateConsumer(ctx, "T", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
			if err != nil {
				panic(err)
			}
			it, _ := cons.Messages(jetstream.PullMaxMessages(1))
			fmt.Println("ready")
			reply := make([]byte, 350)
			for {
				m, err := it.Next()
				if err != nil {
					panic(err)
				}
				js.PublishAsync("r", reply)
				m.Ack()
			}
		}
		cons, err := js.OrderedConsumer(ctx, "R", jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
		if err != nil {
			panic(err)
		}
		it, _ := cons.Messages()
		task := make([]byte, 900)
		d := []time.Duration{}
		for i := range 2200 {
			t0 := time.Now()
			js.PublishAsync("t", task)
			if _, err := it.Next(); err != nil {
				panic(err)
			}
			if i >= 200 {
				d = append(d, time.Since(t0))
			}
		}
		slices.Sort(d)
		fmt.Println(os.Args[3], "p50", d[len(d)/2], "p99", d[len(d)*99/100])
	}
}
