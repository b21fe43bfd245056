"""A shim of vllm.platforms for scripts/upstream_guard.sh's test folder: current_platform answers
what vLLM's top-k test file asks of it (is_cuda, is_rocm, has_device_capability, and the seeding
its set_random_seed shim uses) from torch alone. Capabilities are vLLM's integers: 90 is sm_90."""
import torch


class _Platform:
    def is_cuda(self):
        return torch.cuda.is_available() and torch.version.hip is None

    def is_rocm(self):
        return torch.cuda.is_available() and torch.version.hip is not None

    def _capability(self):
        major, minor = torch.cuda.get_device_capability()
        return major * 10 + minor

    def has_device_capability(self, capability):
        if not torch.cuda.is_available():
            return False
        if isinstance(capability, tuple):
            capability = capability[0] * 10 + capability[1]
        return self._capability() >= capability

    def is_device_capability_family(self, capability):
        return torch.cuda.is_available() and self._capability() // 10 == capability // 10

    def manual_seed_all(self, seed):
        torch.cuda.manual_seed_all(seed)


current_platform = _Platform()
