// register.cpp: registers every reference kernel (ref.hpp).
#include "kernels/ref/ref.hpp"

namespace troupe::kernels {

void register_ref_kernels(registry& r) {
  ref::register_embedding(r);
  ref::register_matmul(r);
  ref::register_norm(r);
  ref::register_rope(r);
  ref::register_elementwise(r);
  ref::register_softmax(r);
  ref::register_reduce(r);
  ref::register_attention(r);
  ref::register_convert(r);
  ref::register_moe(r);
  ref::register_latent(r);
  ref::register_recurrent(r);
  ref::register_sparse(r);
  ref::register_hyper(r);
  ref::register_compress(r);
}

} // namespace troupe::kernels
