"""Keys of the partition state kept in the segmented log's properties (one metadata node)."""

L_EPOCH = "kafka.epoch"  # current leader epoch
L_EPOCHS = "kafka.epochs"  # leader epoch history "epoch,start;..."
L_START = "kafka.log-start"  # DeleteRecords low watermark
L_NEXT = "kafka.next"  # next-offset checkpoint (for logs whose ledgers are all gone)
L_PRODUCERS = "kafka.producers"  # producer-state snapshot (JSON, valid up to its "upto")
