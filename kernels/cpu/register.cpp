// register.cpp (cpu): registers every CPU kernel (cpu.hpp).
#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels {

void register_cpu_kernels(registry& r) {
  cpu::register_embedding(r);
  cpu::register_matmul(r);
  cpu::register_norm(r);
  cpu::register_rope(r);
  cpu::register_elementwise(r);
  cpu::register_softmax(r);
  cpu::register_reduce(r);
  cpu::register_attention(r);
  cpu::register_convert(r);
  cpu::register_latent(r);
  cpu::register_recurrent(r);
  cpu::register_sparse(r);
  cpu::register_hyper(r);
  cpu::register_compress(r);
}

} // namespace troupe::kernels
