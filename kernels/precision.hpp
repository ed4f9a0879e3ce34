// precision.hpp: a process-wide choice between speed and fidelity for quantized weights. By
// default the CPU kernels multiply quantized weights (q8_0, q4_0, the K-quants, MXFP4) with
// activations quantized to int8 per 32 values, as llama.cpp does; with exact activations they
// expand the weights and multiply f32 activations instead (slower: the arithmetic of the
// published model for weight-only formats such as GPT-OSS's MXFP4, which transformers runs in
// bf16 / f32). The kernels and the fusion passes read it when a model is loaded and planned:
// set it before. TROUPE_EXACT_ACTIVATIONS=1 sets it at start-up. Tests: the MXFP4 fixtures
// (tests/exec/forward_test.cpp, tests/actors/pipeline_test.cpp).
#pragma once

namespace troupe::kernels {

void set_exact_activations(bool on);
bool exact_activations();

} // namespace troupe::kernels
