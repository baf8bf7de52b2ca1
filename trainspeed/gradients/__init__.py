"""What the trainer and the bench measure of the gradients themselves (the gradient noise scale)."""
