"""Pipeline-bootstrap coverage of AIB and ACIB (200 replications x 100 resamples; resumable)."""
from causalkit.borrowing.studies import bootstrap_coverage

if __name__ == "__main__":
    print(bootstrap_coverage(n_jobs=2, out="simulations/results/borrowing/bootstrap.csv")
          .round(4).to_string())
