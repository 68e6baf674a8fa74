// The trace hook: names reach the sink with their layer; without a sink nothing happens.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "gpu/core/host_buffer.h"
#include "gpu/core/trace.h"

using namespace tandem::gpu;

namespace {
struct recording_sink : trace_sink {
  std::vector<std::string> seen;
  void record(std::string_view name, int layer, const tensor& value) override {
    seen.push_back(std::string(name) + "@" + std::to_string(layer) + " " + value.shape_string());
  }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(trace_test)

BOOST_AUTO_TEST_CASE(a_tracer_reports_each_named_activation_with_its_layer) {
  recording_sink sink;
  const tracer trace(&sink);
  host_buffer x(dtype::float32, {2, 3});
  trace(x, "attn_out", 4);
  trace(x, "final_norm");
  BOOST_TEST(trace.enabled());
  BOOST_TEST((sink.seen == std::vector<std::string>{"attn_out@4 [2, 3]", "final_norm@-1 [2, 3]"}));
}

BOOST_AUTO_TEST_CASE(a_tracer_without_a_sink_is_disabled) {
  const tracer trace;
  host_buffer x(dtype::float32, {1});
  trace(x, "anything", 0);
  BOOST_TEST(!trace.enabled());
}

BOOST_AUTO_TEST_SUITE_END()
