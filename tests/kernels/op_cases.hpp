// op_cases.hpp: the table of op-harness cases (after ggml's test-backend-ops). A case is one
// op variant with concrete shapes, dtypes and parameters, its seeded random inputs (never
// all zeros), its output specs, a tolerance for its dtype, and byte / flop counts for perf
// mode. Adding an op or a dtype means adding cases in op_cases.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/op.hpp"

namespace troupe::kernels::harness {

struct host_tensor {
  dtype type = dtype::f32;
  shape dims;
  std::vector<uint8_t> bytes; // contents for inputs; size for outputs
  bool present = true;
};

struct tolerance {
  double nmse = 1e-9;    // sum((y - ref)^2) / sum(ref^2)
  double max_abs = 1e-4; // largest |y - ref|
};

struct op_case {
  std::string name; // "matmul(T=5,K=128,N=33,W=q8_0)"
  op kind = op::add;
  std::vector<host_tensor> src; // up to six, absent ones not present
  host_tensor dst;
  host_tensor dst2; // topk values, add_rmsnorm's sum, matmul_qkv's k
  host_tensor dst3; // matmul_qkv's v
  op_params p;
  tolerance tol;
  double flops = 0; // per call
  double bytes = 0; // read + written per call
};

std::vector<op_case> all_cases();
/// The expanded weight formats' cases (op_cases_quant.cpp), part of all_cases().
void kquant_cases(std::vector<op_case>& out_cases);
/// The attention ops' cases (op_cases_attention.cpp).
void attention_cases(std::vector<op_case>& out_cases);
/// The mixture-of-experts and latent-attention ops' cases (op_cases_moe.cpp).
void moe_cases(std::vector<op_case>& out_cases);
void latent_cases(std::vector<op_case>& out_cases);
/// DeepSeek-V4's ops' cases (op_cases_v4.cpp).
void v4_cases(std::vector<op_case>& out_cases);

} // namespace troupe::kernels::harness
