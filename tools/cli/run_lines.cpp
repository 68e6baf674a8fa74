// `tandem run`'s lines on the terminal and in controller.log.
#include "tools/cli/run_lines.h"

#include <cstddef>

#include "actors/bridge/log_line.hpp"
#include "gpu/core/printable.h"

namespace tandem::cli {

run_lines::run_lines(std::ostream& out, std::ostream& err, std::shared_ptr<records::record_file> log)
    : out_(out), err_(err), log_(std::move(log)) {
  if (log_)
    copy_log_lines([log = log_](const std::string& line) {
      (void)log->append(line);  // a failure stays with the file: the run reads it at its end
    });
}

run_lines::~run_lines() {
  if (log_) copy_log_lines({});
}

void run_lines::out(const std::string& line) const { write(out_, line); }

void run_lines::err(const std::string& line) const { write(err_, line); }

void run_lines::write(std::ostream& to, const std::string& line) const {
  const std::string printable = gpu::printable(line, std::size_t{1} << 16);
  const std::string text = printable + "\n";
  to.write(text.data(), static_cast<std::streamsize>(text.size()));
  to.flush();
  if (log_) (void)log_->append(printable);
}

}  // namespace tandem::cli
