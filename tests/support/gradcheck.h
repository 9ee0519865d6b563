// Finite-difference gradient checking shared by the backward tests.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace snug::test {

// dL/dx[i] by central differences of step 1e-3 (divided by the step actually representable
// in float); loss() reads x, which is restored after each element.
std::vector<double> numerical_grad(std::vector<float>& x, const std::function<double()>& loss);

// fp32 finite differences are noisy: every element must agree to 1e-2 of the gradient's
// scale (its largest magnitude, at least 1e-3), and 90% of them to 1e-3. Adds gtest failures
// naming `what` and the worst element.
void expect_grad_close(const std::vector<float>& analytic, const std::vector<double>& numeric,
                       const std::string& what);

}  // namespace snug::test
