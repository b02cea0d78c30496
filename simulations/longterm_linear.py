from causalkit.studies import study_main

study_main("longterm-linear")
