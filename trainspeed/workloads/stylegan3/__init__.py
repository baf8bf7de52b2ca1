"""StyleGAN3 (alias-free GAN) written with plain PyTorch ops, as a trainspeed workload."""
