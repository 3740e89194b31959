"""What services stand on: the composition root, the consumer loop and lanes, dead letters,
the outbox relay, subscriptions, the HTTP listener and the types jobs are written against."""
