"""Real trainers (Lightning, the Hugging Face Trainer, torchdata, plain torchrun) as clients of the resumption state."""
