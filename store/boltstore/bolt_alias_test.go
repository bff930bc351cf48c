package boltstore

import (
	bolt "go.etcd.io/bbolt"
)

type boltTx = bolt.Tx
