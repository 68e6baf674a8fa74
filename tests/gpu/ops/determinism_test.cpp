// Determinism on the CUDA backend: every op with a reduction across threads (the backwards with
// their weight and key/value gradients, the embedding scatter with repeated ids, the scalar
// gradient of layer_scalar, the logprob gradient over a 262144-token vocabulary, AdamW) run twice
// on the same inputs gives the same bits, in float32 and bfloat16 storage. Sizes are large enough
// that every reduction spans many blocks. This is what lets a two-GPU run later match a one-GPU
// run bit for bit. And a row of the paged forward (decoding and chunked prefill) gets the bits of
// the same row of the packed forward, at the head dims with tensor-core kernels too, so what the
// generator samples from is what the trainer scores. And a token's rows do not depend on its batch:
// a linear over the first rows of a batch, and a sequence's attention alone, give the bits those
// rows get in the whole batch.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "support/cuda_buffers.h"
#include "support/cuda_context.h"
#include "gpu/core/exec_context.h"
#include "gpu/ops/adamw.h"
#include "gpu/ops/attention.h"
#include "gpu/ops/cuda/cublaslt_gemm.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/elementwise.h"
#include "gpu/ops/embedding.h"
#include "gpu/ops/linear.h"
#include "gpu/ops/logprobs.h"
#include "gpu/ops/moe.h"
#include "gpu/ops/paged_attention.h"
#include "gpu/ops/rmsnorm.h"

using namespace tandem::gpu;
using tandem::test::cuda::device_buffer;
namespace bdata = boost::unit_test::data;

namespace {

void require_ok(const status& s) { BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message()); }

/// One scenario: builds its inputs from fixed seeds, runs, and returns its outputs' bytes by name.
using run_result = std::vector<std::pair<std::string, std::vector<unsigned char>>>;
struct scenario {
  std::string name;
  std::function<run_result(const exec_context&, dtype)> run;
};

std::vector<std::int32_t> offsets(const std::vector<std::int32_t>& lengths) {
  std::vector<std::int32_t> cu{0};
  for (auto n : lengths) cu.push_back(cu.back() + n);
  return cu;
}

run_result attention_backward_case(const exec_context& ctx, dtype s, std::int64_t heads, std::int64_t kv_heads,
                                   std::int64_t d, std::int64_t window) {
  const std::vector<std::int32_t> cu = offsets({700, 1300, 48});
  const std::int64_t t = cu.back();
  device_buffer q(s, {t, heads, d}), k(s, {t, kv_heads, d}), v(s, {t, kv_heads, d}), dout(s, {t, heads, d});
  device_buffer cu_seqlens(dtype::int32, {static_cast<std::int64_t>(cu.size())});
  device_buffer out(s, {t, heads, d}), lse(ops::statistics_type(s), {t, heads});
  device_buffer dq(s, {t, heads, d}), dk(s, {t, kv_heads, d}), dv(s, {t, kv_heads, d});
  q.fill_uniform(1);
  k.fill_uniform(2);
  v.fill_uniform(3);
  dout.fill_uniform(4);
  cu_seqlens.upload_ints(cu);
  ops::attention_options o;
  o.scaling = 1.0 / 16;
  o.sliding_window = window;
  require_ok(ops::attention_forward(ctx, q.view(), k.view(), v.view(), cu_seqlens.view(), out.view(), lse.view(), o));
  require_ok(ops::attention_backward(ctx, q.view(), k.view(), v.view(), cu_seqlens.view(), lse.view(), dout.view(),
                                     dq.view(), dk.view(), dv.view(), o, false, out.view()));
  return {{"out", out.raw()}, {"lse", lse.raw()}, {"dq", dq.raw()}, {"dk", dk.raw()}, {"dv", dv.raw()}};
}

std::vector<scenario> scenarios() {
  return {
      {"attention backward, d 256, 8 query heads on 2 kv heads, 3 packed sequences",
       [](const exec_context& c, dtype s) { return attention_backward_case(c, s, 8, 2, 256, 0); }},
      {"attention backward, d 256, MQA, sliding window 512",
       [](const exec_context& c, dtype s) { return attention_backward_case(c, s, 8, 1, 256, 512); }},
      {"attention backward, d 512, 8 query heads on 1 kv head",
       [](const exec_context& c, dtype s) { return attention_backward_case(c, s, 8, 1, 512, 0); }},
      {"rmsnorm backward, 4096 rows of 2560: dx and dw",
       [](const exec_context& c, dtype s) {
         device_buffer x(s, {4096, 2560}), w(s, {2560}), y(s, {4096, 2560}), inv(ops::statistics_type(s), {4096});
         device_buffer dy(s, {4096, 2560}), dx(s, {4096, 2560}), dw(s, {2560});
         x.fill_uniform(5, -3, 3);
         w.fill_uniform(6, 0.5, 1.5);
         dy.fill_uniform(7);
         require_ok(ops::rmsnorm_forward(c, x.view(), w.view(), 1e-6, y.view(), inv.view()));
         require_ok(ops::rmsnorm_backward(c, x.view(), w.view(), inv.view(), dy.view(), dx.view(), dw.view()));
         return run_result{{"dx", dx.raw()}, {"dw", dw.raw()}};
       }},
      {"embedding backward, 16384 tokens over 300 ids (every id repeated)",
       [](const exec_context& c, dtype s) {
         std::vector<std::int32_t> host(16384);
         for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<std::int32_t>((i * 7919) % 300);
         device_buffer ids(dtype::int32, {16384}), dout(s, {16384, 256}), table(s, {300, 256});
         ids.upload_ints(host);
         dout.fill_uniform(8);
         require_ok(ops::embedding_backward(c, ids.view(), dout.view(), 16.0, table.view(), 0));
         return run_result{{"d_table", table.raw()}};
       }},
      {"linear backward, x [2048, 2560], w [1024, 2560]: dx and dw",
       [](const exec_context& c, dtype s) {
         device_buffer x(s, {2048, 2560}), w(s, {1024, 2560}), dy(s, {2048, 1024}), dx(s, {2048, 2560}),
             dw(s, {1024, 2560});
         x.fill_uniform(9);
         w.fill_uniform(10);
         dy.fill_uniform(11);
         require_ok(ops::linear_backward(c, x.view(), w.view(), dy.view(), dx.view(), dw.view()));
         return run_result{{"dx", dx.raw()}, {"dw", dw.raw()}};
       }},
      {"scale_by backward, [4096, 2560]: the layer_scalar gradient",
       [](const exec_context& c, dtype s) {
         device_buffer x(s, {4096, 2560}), dy(s, {4096, 2560}), dx(s, {4096, 2560}), sc(s, {1}), ds(s, {1});
         x.fill_uniform(12);
         dy.fill_uniform(13);
         sc.fill_uniform(14, 0.5, 1);
         require_ok(ops::scale_by_backward(c, x.view(), sc.view(), dy.view(), dx.view(), ds.view()));
         return run_result{{"dx", dx.raw()}, {"ds", ds.raw()}};
       }},
      {"logprobs backward, 40 rows of 262144 without filters; forward at top-k 50 and top-p 0.9",
       [](const exec_context& c, dtype s) {
         device_buffer logits(s, {40, 262144}), targets(dtype::int32, {40}), lp(s, {40}), dlp(s, {40}),
             dlogits(s, {40, 262144});
         logits.fill_uniform(15, -20, 20);
         std::vector<std::int32_t> t(40);
         std::iota(t.begin(), t.end(), 1000);
         targets.upload_ints(t);
         dlp.fill_uniform(16);
         ops::sampling_params p;
         p.temperature = 0.8;
         require_ok(ops::logprobs_backward(c, logits.view(), targets.view(), p, dlp.view(), dlogits.view()));
         p.top_k = 50;
         p.top_p = 0.9;
         require_ok(ops::logprobs_forward(c, logits.view(), targets.view(), p, lp.view()));
         return run_result{{"dlogits", dlogits.raw()}, {"logprobs", lp.raw()}};
       }},
      {"AdamW step over 2^24 + 3 elements",
       [](const exec_context& c, dtype s) {
         const std::int64_t n = (std::int64_t{1} << 24) + 3;
         device_buffer p(s, {n}), g(dtype::float32, {n}), m(s, {n}), v(dtype::float32, {n});
         p.fill_uniform(17);
         g.fill_uniform(18);
         ops::adamw_hyper h;
         h.step = 3;
         require_ok(ops::adamw_step(c, p.view(), g.view(), m.view(), v.view(), h));
         return run_result{{"param", p.raw()}, {"exp_avg", m.raw()}, {"exp_avg_sq", v.raw()}};
       }},
  };
}

std::vector<std::string> scenario_names() {
  std::vector<std::string> names;
  for (const scenario& s : scenarios()) names.push_back(s.name);
  return names;
}


/// The packed forward of sequences `lengths` (bfloat16 or float32), then the same keys and values
/// written into a paged cache of `block`-position blocks (physical blocks in reverse order) and the
/// last `fresh` rows of each sequence run through paged_attention_forward: their out and lse must
/// be the packed rows' bits. fresh {1, 1, 1} is a decode step (bfloat16 at d 256 / 512: the decode
/// kernel, blocks of 8 rows); {37, 1, 64} a chunk of prefill beside a decoding sequence.
void check_paged_rows_match_packed(dtype s, std::int64_t heads, std::int64_t kv_heads, std::int64_t d, std::int64_t window,
                                   const std::vector<std::int32_t>& fresh = {37, 1, 64}) {
  const exec_context ctx = tandem::test::cuda::test_context();
  const std::vector<std::int32_t> lengths{300, 77, 129};
  const std::vector<std::int32_t> cu = offsets(lengths);
  const std::int64_t t = cu.back(), seqs = static_cast<std::int64_t>(lengths.size()), block = 16;
  device_buffer q(s, {t, heads, d}), k(s, {t, kv_heads, d}), v(s, {t, kv_heads, d});
  device_buffer cu_seqlens(dtype::int32, {seqs + 1}), out(s, {t, heads, d}), lse(dtype::float32, {t, heads});
  q.fill_uniform(11);
  k.fill_uniform(12);
  v.fill_uniform(13);
  cu_seqlens.upload_ints(cu);
  ops::attention_options o;
  o.scaling = 1.0 / 16;
  o.sliding_window = window;
  require_ok(ops::attention_forward(ctx, q.view(), k.view(), v.view(), cu_seqlens.view(), out.view(), lse.view(), o));

  // The cache: every position of every sequence, blocks handed out from the last one down.
  std::int64_t cols = 0;
  for (auto n : lengths) cols = std::max<std::int64_t>(cols, (n + block - 1) / block);
  const std::int64_t blocks = seqs * cols;
  std::vector<std::int32_t> table(static_cast<std::size_t>(seqs * cols)), positions;
  for (std::int64_t i = 0; i < seqs * cols; ++i) table[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(blocks - 1 - i);
  for (auto n : lengths)
    for (std::int32_t p = 0; p < n; ++p) positions.push_back(p);
  device_buffer kc(s, {blocks, block, kv_heads, d}), vc(s, {blocks, block, kv_heads, d});
  device_buffer table_d(dtype::int32, {seqs, cols}), all_cu(dtype::int32, {seqs + 1}), all_pos(dtype::int32, {t});
  kc.fill_uniform(14);
  vc.fill_uniform(15);
  table_d.upload_ints(table);
  all_cu.upload_ints(cu);
  all_pos.upload_ints(positions);
  require_ok(ops::paged_kv_write(ctx, k.view(), v.view(), {table_d.view(), all_cu.view(), all_pos.view()}, kc.view(), vc.view()));

  // The new rows: the last `fresh` of each sequence (1: decoding; more: a chunk of prefill).
  std::vector<std::int32_t> row_cu{0}, row_pos;
  std::vector<std::int64_t> packed_row;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    for (std::int32_t p = lengths[i] - fresh[i]; p < lengths[i]; ++p) {
      row_pos.push_back(p);
      packed_row.push_back(cu[i] + p);
    }
    row_cu.push_back(static_cast<std::int32_t>(row_pos.size()));
  }
  const std::int64_t n = static_cast<std::int64_t>(row_pos.size());
  const std::size_t q_row = static_cast<std::size_t>(heads * d) * size_of(s), lse_row = static_cast<std::size_t>(heads) * 4;
  const std::vector<unsigned char> q_all = q.raw(), out_all = out.raw(), lse_all = lse.raw();
  std::vector<unsigned char> q_rows, want_out, want_lse;
  for (const std::int64_t r : packed_row) {
    const auto at = static_cast<std::size_t>(r);
    q_rows.insert(q_rows.end(), q_all.begin() + at * q_row, q_all.begin() + (at + 1) * q_row);
    want_out.insert(want_out.end(), out_all.begin() + at * q_row, out_all.begin() + (at + 1) * q_row);
    want_lse.insert(want_lse.end(), lse_all.begin() + at * lse_row, lse_all.begin() + (at + 1) * lse_row);
  }
  device_buffer pq(s, {n, heads, d}), pout(s, {n, heads, d}), plse(dtype::float32, {n, heads});
  device_buffer prow_cu(dtype::int32, {seqs + 1}), prow_pos(dtype::int32, {n});
  pq.upload(q_rows.data());
  prow_cu.upload_ints(row_cu);
  prow_pos.upload_ints(row_pos);
  require_ok(ops::paged_attention_forward(ctx, pq.view(), kc.view(), vc.view(), {table_d.view(), prow_cu.view(), prow_pos.view()},
                                          pout.view(), plse.view(), o));
  BOOST_TEST((pout.raw() == want_out), "paged out differs from the packed rows' bits");
  BOOST_TEST((plse.raw() == want_lse), "paged lse differs from the packed rows' bits");
}

/// The first `rows` rows of a [R, cols] buffer's bytes.
std::vector<unsigned char> leading_rows(const std::vector<unsigned char>& all, std::int64_t rows, std::int64_t row_bytes) {
  return {all.begin(), all.begin() + rows * row_bytes};
}

/// y = x · wᵀ and dx = dy · w over the first `rows` rows of the same inputs give the bits of those
/// rows over all of them: a token's result does not depend on how many tokens share its batch
/// (row counts up to 1024 take an algorithm of their own, verified to give the same bits).
void check_linear_rows_match(dtype s, std::int64_t in, std::int64_t out) {
  const exec_context ctx = tandem::test::cuda::test_context();
  const std::int64_t all = 5000, width = static_cast<std::int64_t>(size_of(s));
  device_buffer x(s, {all, in}), w(s, {out, in}), dy(s, {all, out}), y(s, {all, out}), dx(s, {all, in});
  x.fill_uniform(11);
  w.fill_uniform(12);
  dy.fill_uniform(13);
  require_ok(ops::linear_forward(ctx, x.view(), w.view(), y.view()));
  require_ok(ops::linear_backward(ctx, x.view(), w.view(), dy.view(), dx.view(), tensor{}));
  const std::vector<unsigned char> x_all = x.raw(), dy_all = dy.raw(), y_all = y.raw(), dx_all = dx.raw();
  for (const std::int64_t rows : {1, 7, 64, 256, 333, 600, 1024, 1025, 4096}) {
    device_buffer xs(s, {rows, in}), dys(s, {rows, out}), ys(s, {rows, out}), dxs(s, {rows, in});
    xs.upload(x_all.data());
    dys.upload(dy_all.data());
    require_ok(ops::linear_forward(ctx, xs.view(), w.view(), ys.view()));
    require_ok(ops::linear_backward(ctx, xs.view(), w.view(), dys.view(), dxs.view(), tensor{}));
    BOOST_TEST((ys.raw() == leading_rows(y_all, rows, out * width)), "y of the first " << rows << " rows differs");
    BOOST_TEST((dxs.raw() == leading_rows(dx_all, rows, in * width)), "dx of the first " << rows << " rows differs");
  }
}

/// The MoE experts' products (float32 results of `s` operands, C = A · B_eᵀ with k `k` and n `n`,
/// as gpu/ops/cuda/moe.cu and moe_padded.cu call gemm) at every layout a token may take: its
/// expert's rows alone at a few row counts (the sorted layout), and 16 experts' pads in one batched
/// call (the padded layout of a decode step), give the bits of the same rows of one call over 5000
/// rows. Failures name the layout and list the row-count choices made.
void check_expert_products_match(dtype s, std::int64_t k, std::int64_t n) {
  namespace lt = ops::cuda;
  const exec_context ctx = tandem::test::cuda::test_context();
  constexpr std::int64_t all = 5000, experts = 16;
  device_buffer a(s, {all, k}), b(s, {experts, n, k}), c_all(dtype::float32, {experts, all, n});
  device_buffer workspace(dtype::float32, {static_cast<std::int64_t>(lt::gemm_workspace_bytes / 4)});
  a.fill_uniform(41);
  b.fill_uniform(42, -0.5, 0.5);
  const std::int64_t width = static_cast<std::int64_t>(size_of(s));
  auto product = [&](std::int64_t rows, const void* a_at, const void* b_at, void* c_at) {
    lt::gemm_operands g;
    g.transpose_b = true;
    g.m = rows, g.n = n, g.k = k;
    g.a = a_at, g.lda = k;
    g.b = b_at, g.ldb = k;
    g.c = c_at, g.ldc = n;
    g.row_invariant = true;
    return g;
  };
  auto b_of = [&](std::int64_t e) { return static_cast<const char*>(b.view().data()) + e * n * k * width; };
  auto choices = [] {
    std::string text;
    for (const std::string& line : ops::linear_algorithm_choices()) text += "\n  " + line;
    return text;
  };
  for (std::int64_t e = 0; e < experts; ++e)
    require_ok(lt::gemm(ctx, "expert product", s, dtype::float32,
                        product(all, a.view().data(), b_of(e), static_cast<float*>(c_all.view().data()) + e * all * n),
                        workspace.view().data()));
  const std::vector<unsigned char> want = c_all.raw();
  const std::int64_t row_bytes = n * 4;
  auto expert_rows = [&](std::int64_t e, std::int64_t first, std::int64_t rows) {
    const auto at = want.begin() + (e * all + first) * row_bytes;
    return std::vector<unsigned char>(at, at + rows * row_bytes);
  };
  // The sorted layout: expert 3's first `rows` rows alone.
  for (const std::int64_t rows : {1, 37, 75, 128, 600, 637, 1024}) {
    device_buffer c(dtype::float32, {rows, n});
    require_ok(lt::gemm(ctx, "expert product", s, dtype::float32, product(rows, a.view().data(), b_of(3), c.view().data()),
                        workspace.view().data()));
    BOOST_TEST((c.raw() == expert_rows(3, 0, rows)), "expert 3 alone at " << rows << " rows differs" << choices());
  }
  // The padded layout: expert e's pad is rows [e·pad, (e+1)·pad) of A, one batched call.
  for (const std::int64_t pad : {64, 128}) {
    device_buffer c(dtype::float32, {experts, pad, n});
    lt::gemm_operands g = product(pad, a.view().data(), b.view().data(), c.view().data());
    g.batch = experts, g.stride_a = pad * k, g.stride_b = n * k, g.stride_c = pad * n;
    const status batched = lt::gemm(ctx, "expert product", s, dtype::float32, g, workspace.view().data());
    BOOST_TEST_REQUIRE((batched.is_ok() || batched.code() == status_code::unsupported), batched.message());
    if (!batched.is_ok()) {
      BOOST_TEST_MESSAGE("no batched call at pad " << pad << ": " << batched.message());
      continue;
    }
    const std::vector<unsigned char> got = c.raw();
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto at = got.begin() + e * pad * row_bytes;
      BOOST_TEST((std::vector<unsigned char>(at, at + pad * row_bytes) == expert_rows(e, e * pad, pad)),
                 "expert " << e << " of the batched call at pad " << pad << " differs" << choices());
    }
  }
}

/// rmsnorm_forward, residual_norm_forward (with the layer scalar and the next norm) and
/// rmsnorm_rope_forward over the first `rows` rows of the same inputs give the bits of those rows
/// over all of them (the kernels' blocks hold fewer rows when there are few: a decode step's rows
/// must get the trainer's bits).
void check_norm_rows_match(dtype s, std::int64_t d) {
  const exec_context ctx = tandem::test::cuda::test_context();
  const std::int64_t all = 3000, heads = 4, hd = 256, width = static_cast<std::int64_t>(size_of(s));
  device_buffer x(s, {all, d}), w(s, {d}), res(s, {all, d}), scale(s, {1}), nw(s, {d});
  device_buffer y(s, {all, d}), out(s, {all, d}), pre(s, {all, d}), next(s, {all, d});
  device_buffer qx(s, {all, heads, hd}), qw(s, {hd}), cos(s, {all, hd}), sin(s, {all, hd}), qy(s, {all, heads, hd});
  std::uint64_t seed = 31;
  for (device_buffer* b : {&x, &w, &res, &scale, &nw, &qx, &qw, &cos, &sin}) b->fill_uniform(seed++);
  const auto run = [&](device_buffer& yy, device_buffer& oo, device_buffer& pp, device_buffer& nn, device_buffer& qq,
                       const device_buffer& xx, const device_buffer& rr, const device_buffer& qxx, const device_buffer& cc,
                       const device_buffer& ss) {
    require_ok(ops::rmsnorm_forward(ctx, xx.view(), w.view(), 1e-6, yy.view()));
    ops::residual_norm_io io;
    io.x = xx.view();
    io.w = w.view();
    io.residual = rr.view();
    io.out = oo.view();
    io.scale = scale.view();
    io.pre_scale = pp.view();
    io.next_w = nw.view();
    io.next = nn.view();
    require_ok(ops::residual_norm_forward(ctx, io, 1e-6));
    require_ok(ops::rmsnorm_rope_forward(ctx, qxx.view(), qw.view(), 1e-6, cc.view(), ss.view(), qq.view()));
  };
  run(y, out, pre, next, qy, x, res, qx, cos, sin);
  const auto head = [&](const device_buffer& b, std::int64_t rows, std::int64_t row_elems) {
    return leading_rows(b.raw(), rows, row_elems * width);
  };
  for (const std::int64_t rows : {1, 7, 64, 256, 333, 1024}) {
    device_buffer xs(s, {rows, d}), rs(s, {rows, d}), qxs(s, {rows, heads, hd}), cs(s, {rows, hd}), ss(s, {rows, hd});
    device_buffer ys(s, {rows, d}), os(s, {rows, d}), ps(s, {rows, d}), ns(s, {rows, d}), qys(s, {rows, heads, hd});
    xs.upload(x.raw().data());
    rs.upload(res.raw().data());
    qxs.upload(qx.raw().data());
    cs.upload(cos.raw().data());
    ss.upload(sin.raw().data());
    run(ys, os, ps, ns, qys, xs, rs, qxs, cs, ss);
    BOOST_TEST((ys.raw() == head(y, rows, d)), "rmsnorm of the first " << rows << " rows differs");
    BOOST_TEST((os.raw() == head(out, rows, d)), "residual_norm's stream of the first " << rows << " rows differs");
    BOOST_TEST((ns.raw() == head(next, rows, d)), "residual_norm's next norm of the first " << rows << " rows differs");
    BOOST_TEST((qys.raw() == head(qy, rows, heads * hd)), "rmsnorm_rope of the first " << rows << " rows differs");
  }
}

/// A sequence's attention output alone is the bits of its rows in a packed batch behind another.
void check_attention_sequence_matches_packed(dtype s, std::int64_t heads, std::int64_t kv_heads, std::int64_t d,
                                             std::int64_t window) {
  const exec_context ctx = tandem::test::cuda::test_context();
  const std::int64_t before = 301, len = 517, t = before + len, width = static_cast<std::int64_t>(size_of(s));
  device_buffer q(s, {t, heads, d}), k(s, {t, kv_heads, d}), v(s, {t, kv_heads, d});
  device_buffer out(s, {t, heads, d}), lse(ops::statistics_type(s), {t, heads}), cu(dtype::int32, {3});
  q.fill_uniform(21);
  k.fill_uniform(22);
  v.fill_uniform(23);
  cu.upload_ints({0, static_cast<std::int32_t>(before), static_cast<std::int32_t>(t)});
  ops::attention_options o;
  o.scaling = 1.0 / 16;
  o.sliding_window = window;
  require_ok(ops::attention_forward(ctx, q.view(), k.view(), v.view(), cu.view(), out.view(), lse.view(), o));
  const std::int64_t lse_width = static_cast<std::int64_t>(size_of(ops::statistics_type(s)));
  const auto tail = [&](const device_buffer& b, std::int64_t row_bytes) {  // the rows after `before`
    const std::vector<unsigned char> all = b.raw();
    return std::vector<unsigned char>(all.begin() + before * row_bytes, all.end());
  };
  device_buffer q1(s, {len, heads, d}), k1(s, {len, kv_heads, d}), v1(s, {len, kv_heads, d});
  device_buffer out1(s, {len, heads, d}), lse1(ops::statistics_type(s), {len, heads}), cu1(dtype::int32, {2});
  q1.upload(tail(q, heads * d * width).data());
  k1.upload(tail(k, kv_heads * d * width).data());
  v1.upload(tail(v, kv_heads * d * width).data());
  cu1.upload_ints({0, static_cast<std::int32_t>(len)});
  require_ok(ops::attention_forward(ctx, q1.view(), k1.view(), v1.view(), cu1.view(), out1.view(), lse1.view(), o));
  BOOST_TEST((out1.raw() == tail(out, heads * d * width)), "the sequence's attention output alone differs from its packed rows");
  BOOST_TEST((lse1.raw() == tail(lse, heads * lse_width)), "the sequence's log-sum-exp alone differs from its packed rows");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_determinism)

BOOST_DATA_TEST_CASE(every_op_with_a_reduction_gives_the_same_bits_twice,
                     bdata::make(std::vector<std::string>{"float32", "bfloat16"}) * bdata::make(scenario_names()),
                     storage_name, name) {
  const exec_context ctx = tandem::test::cuda::test_context();
  const dtype storage = storage_name == "float32" ? dtype::float32 : dtype::bfloat16;
  for (const scenario& sc : scenarios()) {
    if (sc.name != name) continue;
    BOOST_TEST_CONTEXT(to_string(storage) << " storage: " << sc.name) {
      const run_result first = sc.run(ctx, storage);
      const run_result second = sc.run(ctx, storage);
      BOOST_TEST_REQUIRE(first.size() == second.size());
      for (std::size_t i = 0; i < first.size(); ++i) {
        const auto& a = first[i].second;
        const auto& b = second[i].second;
        BOOST_TEST_REQUIRE(a.size() == b.size());
        std::size_t differing = 0, first_at = 0;
        for (std::size_t j = 0; j < a.size(); ++j)
          if (a[j] != b[j] && differing++ == 0) first_at = j;
        BOOST_TEST(differing == 0u, first[i].first << ": " << differing << " bytes differ between two runs, the first at byte "
                                                   << first_at);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_paged_row_gets_the_bits_of_the_same_row_of_the_packed_forward) {
  for (const dtype s : {dtype::float32, dtype::bfloat16}) {
    BOOST_TEST_CONTEXT(to_string(s) << " storage, d 256, 8/1 heads, window 100") { check_paged_rows_match_packed(s, 8, 1, 256, 100); }
    BOOST_TEST_CONTEXT(to_string(s) << " storage, d 256, 4/2 heads, full") { check_paged_rows_match_packed(s, 4, 2, 256, 0); }
    BOOST_TEST_CONTEXT(to_string(s) << " storage, d 512, 8/1 heads, full") { check_paged_rows_match_packed(s, 8, 1, 512, 0); }
    BOOST_TEST_CONTEXT(to_string(s) << " storage, d 64, 4/1 heads, window 20") { check_paged_rows_match_packed(s, 4, 1, 64, 20); }
  }
}

BOOST_AUTO_TEST_CASE(a_decode_step_gets_the_bits_of_the_same_rows_of_the_packed_forward) {
  // Positions 299, 76 and 128: several key tiles, a window that starts inside a tile, and (4/2
  // and 2/1 heads, two new rows a sequence) decode blocks whose rows sit at different positions.
  const dtype s = dtype::bfloat16;
  BOOST_TEST_CONTEXT("d 256, 8/1 heads, window 100") { check_paged_rows_match_packed(s, 8, 1, 256, 100, {1, 1, 1}); }
  BOOST_TEST_CONTEXT("d 256, 16/1 heads (two blocks a row), full") { check_paged_rows_match_packed(s, 16, 1, 256, 0, {1, 1, 1}); }
  BOOST_TEST_CONTEXT("d 256, 4/2 heads, full, two rows") { check_paged_rows_match_packed(s, 4, 2, 256, 0, {2, 1, 2}); }
  BOOST_TEST_CONTEXT("d 512, 8/1 heads, full") { check_paged_rows_match_packed(s, 8, 1, 512, 0, {1, 1, 1}); }
  BOOST_TEST_CONTEXT("d 512, 2/1 heads, window 40, two rows") { check_paged_rows_match_packed(s, 2, 1, 512, 40, {2, 2, 1}); }
}

BOOST_AUTO_TEST_CASE(a_linear_row_gets_the_same_bits_whatever_the_row_count) {
  for (const dtype s : {dtype::float32, dtype::bfloat16}) {
    BOOST_TEST_CONTEXT(to_string(s) << " storage, 1536 -> 2048") { check_linear_rows_match(s, 1536, 2048); }
    BOOST_TEST_CONTEXT(to_string(s) << " storage, 2560 -> 384") { check_linear_rows_match(s, 2560, 384); }
    BOOST_TEST_CONTEXT(to_string(s) << " storage, 6144 -> 1536") { check_linear_rows_match(s, 6144, 1536); }
    // Small k, as in the tiny recipes' models and the MoE capture test's experts (hidden 64,
    // inner 32), where a bucket's algorithm is probed at the bucket's rows (1024 for 600).
    BOOST_TEST_CONTEXT(to_string(s) << " storage, 64 -> 256") { check_linear_rows_match(s, 64, 256); }
    BOOST_TEST_CONTEXT(to_string(s) << " storage, 32 -> 64") { check_linear_rows_match(s, 32, 64); }
  }
}

BOOST_AUTO_TEST_CASE(an_expert_row_gets_the_same_bits_sorted_alone_or_padded_in_a_batch) {
  for (const dtype s : {dtype::float32, dtype::bfloat16}) {
    // The MoE capture test's experts: hidden 64, inner 32 (gate_up 64 -> 64, down 32 -> 64).
    BOOST_TEST_CONTEXT(to_string(s) << " operands, gate_up 64 -> 64") { check_expert_products_match(s, 64, 64); }
    BOOST_TEST_CONTEXT(to_string(s) << " operands, down 32 -> 64") { check_expert_products_match(s, 32, 64); }
  }
}

BOOST_AUTO_TEST_CASE(a_norm_row_gets_the_same_bits_whatever_the_row_count) {
  for (const dtype s : {dtype::float32, dtype::bfloat16}) {
    BOOST_TEST_CONTEXT(to_string(s) << " storage, d 1536") { check_norm_rows_match(s, 1536); }
    BOOST_TEST_CONTEXT(to_string(s) << " storage, d 2560") { check_norm_rows_match(s, 2560); }
  }
}

BOOST_AUTO_TEST_CASE(a_sequence_gets_the_same_attention_bits_alone_and_packed_behind_another) {
  for (const dtype s : {dtype::float32, dtype::bfloat16}) {
    BOOST_TEST_CONTEXT(to_string(s) << " storage, d 256, 8/1 heads, window 100") { check_attention_sequence_matches_packed(s, 8, 1, 256, 100); }
    BOOST_TEST_CONTEXT(to_string(s) << " storage, d 512, 8/1 heads, full") { check_attention_sequence_matches_packed(s, 8, 1, 512, 0); }
    BOOST_TEST_CONTEXT(to_string(s) << " storage, d 64, 4/2 heads, full") { check_attention_sequence_matches_packed(s, 4, 2, 64, 0); }
  }
}

BOOST_AUTO_TEST_SUITE_END()
