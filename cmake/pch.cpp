// Carrier of the shared precompiled header (<torch/torch.h>, nlohmann/json); no code.
