"""The functional core: losses and update steps over explicit state (params, optimizer state,
torch.Generator); no IO, no host reads in fast paths. Imports models, contracts, reference/, fast/."""
